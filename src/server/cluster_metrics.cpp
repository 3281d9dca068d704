#include "cluster_metrics.h"

#include <limits>
#include <string>
#include <utility>

namespace gapless::server {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

MetricFamily gauge(std::string name, std::string help) {
  return MetricFamily{std::move(name), std::move(help), MetricType::Gauge, {}};
}

void add(MetricFamily& f, const char* label, const std::string& value, double v) {
  ClientMetric m;
  if (label != nullptr) m.label.push_back({label, value});
  m.gauge.value = v;
  f.metric.push_back(std::move(m));
}

// One gauge family per ModelSummary field, labelled by GPU model.
struct ModelGauge {
  const char* name;
  const char* help;
  double placement::ModelSummary::*field;
};

const ModelGauge kModelGauges[] = {
    {"gapless_cluster_gpu_fragment_milli",
     "Idle GPU (milli-GPU) the learned workload mix could not use: sum over nodes of FGD's "
     "F_n(M), by GPU model.",
     &placement::ModelSummary::fragment_milli},
    {"gapless_cluster_gpu_stranded_milli",
     "Idle GPU (milli-GPU) left unused after packing pods of the learned mix one after another, "
     "by GPU model.",
     &placement::ModelSummary::stranded_milli},
    {"gapless_cluster_shared_memory_stranded_bytes",
     "Free vRAM on shared GPUs whose compute is all handed out, by GPU model.",
     &placement::ModelSummary::shared_memory_stranded_bytes},
    {"gapless_cluster_shared_compute_stranded_milli",
     "Free compute on shared GPUs whose vRAM is all handed out, by GPU model.",
     &placement::ModelSummary::shared_compute_stranded_milli},
    {"gapless_cluster_free_nodes", "Unfenced nodes with every GPU idle, by GPU model.",
     &placement::ModelSummary::free_nodes},
    {"gapless_cluster_gpu_capacity_gpus", "GPUs in the model, by GPU model.",
     &placement::ModelSummary::gpus},
    {"gapless_cluster_gpu_allocated_gpus", "GPUs held whole by one pod, by GPU model.",
     &placement::ModelSummary::gpus_whole},
    {"gapless_cluster_shared_memory_capacity_bytes", "vRAM of GPUs without MIG, by GPU model.",
     &placement::ModelSummary::shared_memory_capacity_bytes},
    {"gapless_cluster_shared_memory_allocated_bytes",
     "vRAM handed out to shared-GPU pods, by GPU model.",
     &placement::ModelSummary::shared_memory_allocated_bytes},
    {"gapless_cluster_shared_compute_capacity_milli",
     "Compute of GPUs without MIG (1000 per GPU), by GPU model.",
     &placement::ModelSummary::shared_compute_capacity_milli},
    {"gapless_cluster_shared_compute_allocated_milli",
     "Compute handed out to shared-GPU pods, by GPU model.",
     &placement::ModelSummary::shared_compute_allocated_milli},
};

MetricFamily nvlink_histogram(const placement::ClusterSummary& s) {
  MetricFamily f{"gapless_node_largest_free_nvlink_set",
                 "Nodes by the size of their largest set of free GPUs whose pairs are all "
                 "NVLink-connected (0: no free GPU; 1: a free GPU without a free NVLink peer).",
                 MetricType::Histogram,
                 {}};
  ClientMetric m;
  std::uint64_t cumulative = 0;
  for (std::size_t k = 0; k < s.largest_free_nvlink_set.size(); ++k) {
    cumulative += s.largest_free_nvlink_set[k];
    const bool last = k + 1 == s.largest_free_nvlink_set.size();
    m.histogram.bucket.push_back(
        {cumulative, last ? std::numeric_limits<double>::infinity() : static_cast<double>(k)});
  }
  m.histogram.sample_count = cumulative;
  m.histogram.sample_sum = s.largest_free_nvlink_set_sum;
  f.metric.push_back(std::move(m));
  return f;
}

}  // namespace

std::vector<MetricFamily> cluster_families(const placement::ClusterSummary& s,
                                           const MixStatus& mix) {
  std::vector<MetricFamily> out;
  for (const ModelGauge& g : kModelGauges) {
    MetricFamily& f = out.emplace_back(gauge(g.name, g.help));
    for (const auto& [model, m] : s.models) add(f, "model", model, m.*g.field);
  }
  MetricFamily mig_cap = gauge("gapless_cluster_mig_capacity_instances",
                               "MIG instances (static and pools), by profile.");
  MetricFamily mig_used =
      gauge("gapless_cluster_mig_allocated_instances", "MIG instances in use, by profile.");
  for (const auto& [profile, m] : s.mig) {
    add(mig_cap, "profile", profile, m.capacity);
    add(mig_used, "profile", profile, m.allocated);
  }
  out.push_back(std::move(mig_cap));
  out.push_back(std::move(mig_used));
  out.push_back(nvlink_histogram(s));
  add(out.emplace_back(gauge("gapless_workload_mix_pods_observed",
                             "Pods the learned workload mix was learned from.")),
      nullptr, "", mix.pods_observed);
  add(out.emplace_back(gauge("gapless_workload_mix_age_seconds",
                             "Seconds since the learned workload mix last changed.")),
      nullptr, "", mix.age_seconds);
  return out;
}

std::vector<MetricFamily> waiting_families(const WaitStatus& w) {
  std::vector<MetricFamily> out;
  add(out.emplace_back(gauge("gapless_waiting_pods",
                             "Pods of a profile with drain.minGpus that fit no node and wait "
                             "for one to drain.")),
      nullptr, "", w.waiting);
  add(out.emplace_back(gauge("gapless_drain_reserved_nodes",
                             "Nodes held for the oldest waiting pod (0 or 1): no other pod of "
                             "no higher priority gets them until it starts.")),
      nullptr, "", w.reserved_nodes);
  add(out.emplace_back(gauge("gapless_consolidation_held_rooms",
                             "Nodes consolidation evicted pods from and keeps for the pod it "
                             "made room for, while the evicted pods terminate and "
                             "consolidation.holdSeconds after.")),
      nullptr, "", w.held_rooms);
  return out;
}

std::vector<MetricFamily> quota_families(const std::vector<placement::QuotaRow>& rows) {
  if (rows.empty()) return {};
  MetricFamily used = gauge("gapless_quota_used",
                            "What a namespace holds against a quota of the policy, by resource "
                            "(whole_gpus, vram_mib, compute_milli, mig_slices) and GPU model "
                            "(empty: all models). A quota shared by several namespaces counts "
                            "their sum against its limit.");
  MetricFamily limit = gauge("gapless_quota_limit",
                             "A quota's limit for a namespace, by resource and GPU model; shared "
                             "quotas repeat theirs on each of their namespaces.");
  for (const placement::QuotaRow& r : rows) {
    for (auto [f, v] : {std::pair{&used, r.used}, std::pair{&limit, r.limit}}) {
      ClientMetric m;
      m.label = {
          {"quota", r.quota}, {"namespace", r.ns}, {"resource", r.resource}, {"model", r.model}};
      m.gauge.value = static_cast<double>(v);
      f->metric.push_back(std::move(m));
    }
  }
  return {std::move(used), std::move(limit)};
}

}  // namespace gapless::server
