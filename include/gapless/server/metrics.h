// Prometheus metrics of the extender (prometheus-cpp core; served by the extender's own HTTP
// server on GET /metrics, one port for everything). Thread-safe.
#pragma once

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <prometheus/metric_family.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "gapless/door/door.h"
#include "gapless/placement/cluster_summary.h"

namespace gapless::server {

class Metrics : public door::DoorCounters {
 public:
  Metrics();
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  // verb: filter, prioritize, bind, preempt; ok: the answer carried no Error.
  void observe_request(const std::string& verb, bool ok, double seconds);
  // `nodes` nodes rejected for this reason in one filter call.
  void count_rejection(const std::string& reason_label, double nodes = 1);
  void count_bind(const std::string& outcome);  // success, error, idempotent, conflict
  // One part of a bind (phase: queue, admit, reserve, claim, binding; docs/metrics.md).
  void observe_bind_phase(const std::string& phase, double seconds);
  void count_policy_reload(bool ok);
  // An allocation record that could not be read or applied (its node is fenced).
  void count_bad_record();
  // A fence set for a bad allocation record was lifted (k8s::ClusterSync).
  void count_fence_lifted();
  // A local reservation dropped for an allocation record seen on the watch (k8s::ClusterSync).
  void count_reservation_dropped();
  // A request the HTTP server answered without a worker because its queue was full; route:
  // the verb (filter, ...) or the path (/version, ...).
  void count_overload(const std::string& route) override;
  // A connection the HTTP server's door refused or cut (door::DoorCounters' reasons).
  void count_connection_cut(const std::string& reason) override;

  // In one prioritize call: the best node's raw engine score minus the runner-up's (how clear
  // the choice was; 0: a tie).
  void observe_score_margin(double margin);
  // The learned mix's version as last seen (placement::Scheduler::mix_version); the mix's age
  // restarts when it changes.
  void note_mix_version(std::uint64_t version);
  double mix_age_seconds() const;

  // Refreshes the cluster gauges from the scheduler's live summary (no walk over the model).
  void update_cluster(const placement::ClusterSummary& summary);

  // The registry, for metric families registered elsewhere (server/pairing_waits.h).
  prometheus::Registry& registry() { return *registry_; }

  // Text exposition format (prometheus::TextSerializer), with `extra` families (built at scrape
  // time by the caller) after the registry's.
  std::string serialize(std::vector<prometheus::MetricFamily> extra = {}) const;

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Counter>& requests_;
  prometheus::Family<prometheus::Histogram>& latency_;
  prometheus::Family<prometheus::Counter>& rejections_;
  prometheus::Family<prometheus::Counter>& binds_;
  prometheus::Family<prometheus::Histogram>& bind_phases_;
  prometheus::Family<prometheus::Counter>& reloads_;
  prometheus::Family<prometheus::Counter>& bad_records_;
  prometheus::Family<prometheus::Counter>& fences_lifted_;
  prometheus::Family<prometheus::Counter>& reservations_dropped_;
  prometheus::Family<prometheus::Counter>& overloads_;
  prometheus::Family<prometheus::Counter>& connections_cut_;
  prometheus::Family<prometheus::Gauge>& gpus_;
  prometheus::Family<prometheus::Gauge>& gpus_in_use_;
  prometheus::Family<prometheus::Gauge>& vram_allocated_;
  prometheus::Family<prometheus::Gauge>& mig_free_;
  prometheus::Family<prometheus::Gauge>& nodes_;
  prometheus::Histogram& score_margin_;

  std::atomic<std::uint64_t> mix_version_{0};  // checked without the lock on every verb
  mutable std::mutex mix_mu_;
  std::chrono::steady_clock::time_point mix_changed_ = std::chrono::steady_clock::now();
};

}  // namespace gapless::server
