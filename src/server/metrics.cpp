#include "gapless/server/metrics.h"

#include <prometheus/text_serializer.h>

#include <map>

namespace gapless::server {

namespace {
const prometheus::Histogram::BucketBoundaries kLatencyBuckets = {
    0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1, 5};
// Raw engine scores are in [0, 1]; most margins that matter are small.
const prometheus::Histogram::BucketBoundaries kMarginBuckets = {0,    0.001, 0.005, 0.01, 0.02,
                                                                0.05, 0.1,   0.2,   0.5};
}  // namespace

Metrics::Metrics()
    : registry_(std::make_shared<prometheus::Registry>()),
      requests_(prometheus::BuildCounter()
                    .Name("gapless_extender_requests_total")
                    .Help("Extender calls by verb and outcome (error: the answer carried Error).")
                    .Register(*registry_)),
      latency_(prometheus::BuildHistogram()
                   .Name("gapless_extender_request_duration_seconds")
                   .Help("Time to answer an extender call, by verb.")
                   .Register(*registry_)),
      rejections_(prometheus::BuildCounter()
                      .Name("gapless_filter_rejections_total")
                      .Help("Nodes rejected by filter, by reason.")
                      .Register(*registry_)),
      binds_(prometheus::BuildCounter()
                 .Name("gapless_binds_total")
                 .Help("Bind calls by outcome (success, idempotent, error; conflict: another "
                       "replica claimed the GPUs first).")
                 .Register(*registry_)),
      bind_phases_(prometheus::BuildHistogram()
                       .Name("gapless_bind_phase_seconds")
                       .Help("Time a bind spent in each part: queue (waiting for a bind thread), "
                             "admit (the pod checked against its node), reserve (the model), "
                             "claim (the node's claim object written), binding (the Binding "
                             "posted).")
                       .Register(*registry_)),
      reloads_(prometheus::BuildCounter()
                   .Name("gapless_policy_reloads_total")
                   .Help("Policy reloads by outcome; a failed reload keeps the old policy.")
                   .Register(*registry_)),
      bad_records_(
          prometheus::BuildCounter()
              .Name("gapless_bad_allocation_records_total")
              .Help(
                  "Allocation records that could not be decoded or applied; each fences its node.")
              .Register(*registry_)),
      fences_lifted_(prometheus::BuildCounter()
                         .Name("gapless_fence_lifted_total")
                         .Help("Fences set for a bad allocation record that were lifted: the pod "
                               "went away or finished, or its record became usable.")
                         .Register(*registry_)),
      reservations_dropped_(
          prometheus::BuildCounter()
              .Name("gapless_reservation_conflicts_total")
              .Help("Local reservations (binds in flight) dropped because an allocation record "
                    "seen on the watch holds their GPUs: the API server's record wins.")
              .Register(*registry_)),
      overloads_(
          prometheus::BuildCounter()
              .Name("gapless_http_overload_total")
              .Help("Requests answered at once with an overload error (verbs: 200 with Error, "
                    "other routes: 503) because every worker was busy and the queue full.")
              .Register(*registry_)),
      connections_cut_(
          prometheus::BuildCounter()
              .Name("gapless_http_connections_cut_total")
              .Help("Connections the HTTP server refused or closed before a request was served: "
                    "over --max-connections or --max-connections-per-peer, a request or TLS "
                    "handshake not complete within --request-timeout, a failed TLS handshake.")
              .Register(*registry_)),
      gpus_(prometheus::BuildGauge()
                .Name("gapless_cluster_gpus")
                .Help("GPUs in the model, by health.")
                .Register(*registry_)),
      gpus_in_use_(prometheus::BuildGauge()
                       .Name("gapless_cluster_gpus_in_use")
                       .Help("GPUs holding any allocation, by how: whole, shared, mig.")
                       .Register(*registry_)),
      vram_allocated_(prometheus::BuildGauge()
                          .Name("gapless_cluster_gpu_memory_allocated_bytes")
                          .Help("vRAM handed out to shared-GPU pods.")
                          .Register(*registry_)),
      mig_free_(prometheus::BuildGauge()
                    .Name("gapless_cluster_mig_instances_free")
                    .Help("Free static MIG instances and pool counts, by profile.")
                    .Register(*registry_)),
      nodes_(prometheus::BuildGauge()
                 .Name("gapless_cluster_nodes")
                 .Help("Nodes in the model, by state (ready, fenced).")
                 .Register(*registry_)),
      score_margin_(prometheus::BuildHistogram()
                        .Name("gapless_prioritize_score_margin")
                        .Help("Per prioritize call: the best node's raw engine score (0..1) minus "
                              "the runner-up's.")
                        .Register(*registry_)
                        .Add({}, kMarginBuckets)) {}

void Metrics::observe_score_margin(double margin) {
  score_margin_.Observe(margin);
}

void Metrics::note_mix_version(std::uint64_t version) {
  if (version == mix_version_.load(std::memory_order_relaxed)) return;
  std::lock_guard lock(mix_mu_);
  if (version == mix_version_.load()) return;
  mix_version_ = version;
  mix_changed_ = std::chrono::steady_clock::now();
}

double Metrics::mix_age_seconds() const {
  std::lock_guard lock(mix_mu_);
  const std::chrono::duration<double> age = std::chrono::steady_clock::now() - mix_changed_;
  return age.count();
}

void Metrics::observe_request(const std::string& verb, bool ok, double seconds) {
  requests_.Add({{"verb", verb}, {"outcome", ok ? "ok" : "error"}}).Increment();
  latency_.Add({{"verb", verb}}, kLatencyBuckets).Observe(seconds);
}

void Metrics::count_rejection(const std::string& reason_label, double nodes) {
  rejections_.Add({{"reason", reason_label}}).Increment(nodes);
}

void Metrics::count_bind(const std::string& outcome) {
  binds_.Add({{"outcome", outcome}}).Increment();
}

void Metrics::observe_bind_phase(const std::string& phase, double seconds) {
  bind_phases_.Add({{"phase", phase}}, kLatencyBuckets).Observe(seconds);
}

void Metrics::count_policy_reload(bool ok) {
  reloads_.Add({{"outcome", ok ? "ok" : "error"}}).Increment();
}

void Metrics::count_bad_record() {
  bad_records_.Add({}).Increment();
}

void Metrics::count_reservation_dropped() {
  reservations_dropped_.Add({}).Increment();
}

void Metrics::count_fence_lifted() {
  fences_lifted_.Add({}).Increment();
}

void Metrics::count_overload(const std::string& route) {
  overloads_.Add({{"route", route}}).Increment();
}

void Metrics::count_connection_cut(const std::string& reason) {
  connections_cut_.Add({{"reason", reason}}).Increment();
}

void Metrics::update_cluster(const placement::ClusterSummary& s) {
  gpus_.Add({{"health", "healthy"}}).Set(s.gpus_healthy);
  gpus_.Add({{"health", "unhealthy"}}).Set(s.gpus_unhealthy);
  gpus_in_use_.Add({{"how", "whole"}}).Set(s.gpus_in_use_whole);
  gpus_in_use_.Add({{"how", "shared"}}).Set(s.gpus_in_use_shared);
  gpus_in_use_.Add({{"how", "mig"}}).Set(s.gpus_in_use_mig);
  vram_allocated_.Add({}).Set(s.vram_allocated_bytes);
  nodes_.Add({{"state", "ready"}}).Set(s.nodes_ready);
  nodes_.Add({{"state", "fenced"}}).Set(s.nodes_fenced);
  for (const auto& [profile, m] : s.mig) {
    mig_free_.Add({{"profile", profile}}).Set(m.capacity - m.allocated);
  }
}

std::string Metrics::serialize(std::vector<prometheus::MetricFamily> extra) const {
  std::vector<prometheus::MetricFamily> families = registry_->Collect();
  for (prometheus::MetricFamily& f : extra) families.push_back(std::move(f));
  return prometheus::TextSerializer().Serialize(families);
}

}  // namespace gapless::server
