// Prometheus metrics of the extender (prometheus-cpp core; served by the extender's own HTTP
// server on GET /metrics, one port for everything). Thread-safe.
#pragma once

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <memory>
#include <string>

#include "gapless/model/cluster.h"

namespace gapless::server {

class Metrics {
 public:
  Metrics();
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  // verb: filter, prioritize, bind, preempt; ok: the answer carried no Error.
  void observe_request(const std::string& verb, bool ok, double seconds);
  // `nodes` nodes rejected for this reason in one filter call.
  void count_rejection(const std::string& reason_label, double nodes = 1);
  void count_bind(const std::string& outcome);  // success, error, idempotent
  void count_policy_reload(bool ok);
  // An allocation record that could not be read or applied (its node is fenced).
  void count_bad_record();
  // A request the HTTP server answered without a worker because its queue was full; route:
  // the verb (filter, ...) or the path (/version, ...).
  void count_overload(const std::string& route);

  // Refreshes the cluster gauges from the model. REQUIRES: caller holds the model's lock.
  void update_cluster(const model::Cluster& cluster);

  // Text exposition format (prometheus::TextSerializer).
  std::string serialize() const;

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Counter>& requests_;
  prometheus::Family<prometheus::Histogram>& latency_;
  prometheus::Family<prometheus::Counter>& rejections_;
  prometheus::Family<prometheus::Counter>& binds_;
  prometheus::Family<prometheus::Counter>& reloads_;
  prometheus::Family<prometheus::Counter>& bad_records_;
  prometheus::Family<prometheus::Counter>& overloads_;
  prometheus::Family<prometheus::Gauge>& gpus_;
  prometheus::Family<prometheus::Gauge>& gpus_in_use_;
  prometheus::Family<prometheus::Gauge>& vram_allocated_;
  prometheus::Family<prometheus::Gauge>& mig_free_;
  prometheus::Family<prometheus::Gauge>& nodes_;
};

}  // namespace gapless::server
