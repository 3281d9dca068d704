// GET /debug/state and /metrics: views of the model.
#include <algorithm>
#include <bit>
#include <optional>

#include "cluster_metrics.h"
#include "gapless/k8s/allocation_record.h"
#include "gapless/server/extender.h"
#include "node_json.h"
#include "wire.h"

namespace gapless::server {

using nlohmann::json;

namespace {

const char* source_name(model::InventorySource s) {
  switch (s) {
    case model::InventorySource::kTopologyAnnotation:
      return "topology-annotation";
    case model::InventorySource::kFeatureDiscovery:
      return "feature-discovery";
    case model::InventorySource::kGpushare:
      return "gpushare";
  }
  return "unknown";
}

json gpu_json(const model::Gpu& g) {
  const model::GpuUsage& u = g.used;
  json mig = json::array();
  for (std::size_t i = 0; i < g.mig.instances.size(); ++i) {
    const bool used = i < u.mig_instance_used.size() && u.mig_instance_used[i];
    mig.push_back({{"profile", g.mig.instances[i].profile},
                   {"start", g.mig.instances[i].start},
                   {"used", used}});
  }
  return {{"index", g.index},
          {"uuid", g.uuid},
          {"model", g.model},
          {"memoryMiB", g.memory_mib},
          {"numa", g.numa},
          {"healthy", g.healthy},
          {"inUseBy", g.in_use_by},
          {"migEnabled", g.mig.enabled},
          {"migInstances", std::move(mig)},
          {"used",
           {{"whole", u.whole},
            {"sharedPods", u.shared_pods},
            {"memoryMiB", u.memory_used_mib},
            {"computeMilli", u.compute_used_milli},
            {"gpushareUnits", u.gpushare_used},
            {"migSliceMask", u.mig_slices_used},
            {"migComputeSlices", u.mig_compute_used}}}};
}

json host_json(const model::HostResources& cap, const model::HostResources& used) {
  return {{"cpuMilli", cap.cpu_milli},
          {"memoryMiB", cap.memory_mib},
          {"usedCpuMilli", used.cpu_milli},
          {"usedMemoryMiB", used.memory_mib}};
}

// The learned workload mix: the pod shapes fragmentation-aware strategies judge placements by.
json workload_json(const placement::WorkloadMix& mix, std::size_t observed) {
  json shapes = json::array();
  for (const auto& e : mix.entries) {
    shapes.push_back({{"gpus", e.shape.gpus},
                      {"milliPerGpu", e.shape.milli},
                      {"cpuMilli", e.shape.cpu_milli},
                      {"memoryMiB", e.shape.memory_mib},
                      {"models", e.shape.models},
                      {"weight", e.weight}});
  }
  return {{"podsObserved", observed}, {"shapes", std::move(shapes)}};
}

// The pod holding the drain target and the node (placement/drain.h), or null.
json drain_json(const std::optional<placement::DrainReservation>& d) {
  if (!d) return nullptr;
  return {{"pod", d->pod_uid}, {"node", d->node}};
}

// Rooms consolidation freed and keeps for a waiting pod (placement/drain.h RoomHold): the pod,
// the node, the evicted pods the model still holds (the hold lasts while they terminate) and
// how long it lasts after they left.
json holds_json(const std::vector<placement::RoomHold>& holds) {
  json out = json::array();
  for (const placement::RoomHold& h : holds) {
    out.push_back({{"pod", h.room.pod_uid},
                   {"node", h.room.node},
                   {"evictedTerminating", h.evicted},
                   {"holdSeconds", h.hold_s}});
  }
  return out;
}

}  // namespace

json nvlink_islands(const model::Node& n) {
  const int count = std::min<int>(n.links.size(), 64);
  std::uint64_t seen = 0;
  json islands = json::array();
  for (int i = 0; i < count; ++i) {
    if ((seen >> i & 1) || n.links.nvlink_mask(i) == 0) continue;
    std::uint64_t island = std::uint64_t{1} << i, frontier = island;
    while (frontier != 0) {
      const int g = std::countr_zero(frontier);
      frontier &= frontier - 1;
      const std::uint64_t next = n.links.nvlink_mask(g) & ~island;
      island |= next;
      frontier |= next;
    }
    seen |= island;
    json members = json::array();
    for (int g = 0; g < count; ++g) {
      if (island >> g & 1) members.push_back(g);
    }
    islands.push_back(std::move(members));
  }
  return islands;
}

std::string Extender::debug_state() const {
  json nodes = json::array();
  json allocations = json::array();
  scheduler_.read([&](const model::Cluster& cluster) {
    for (const model::Node* n : cluster.nodes()) {
      json gpus = json::array();
      for (const model::Gpu& g : n->gpus) gpus.push_back(gpu_json(g));
      json pool = json::object();
      for (const auto& [profile, p] : n->mig_pool) {
        pool[profile] = {{"total", p.total}, {"used", p.used}};
      }
      nodes.push_back({{"name", n->name},
                       {"inventory", source_name(n->source)},
                       {"fenced", n->fence_reason},
                       {"host", host_json(n->host, n->host_used)},
                       {"gpus", std::move(gpus)},
                       {"nvlinkIslands", nvlink_islands(*n)},
                       {"migPool", std::move(pool)}});
    }
    for (const model::Allocation* a : cluster.allocations()) {
      if (a->gpus.empty() && a->mig.empty()) continue;  // CPU and memory only: no record
      allocations.push_back({{"pod", a->pod_ns + "/" + a->pod_name},
                             {"uid", a->pod_uid},
                             {"record", json::parse(k8s::encode_allocation_record(*a))}});
    }
  });
  return wire::dump(json{{"policy", policy_source()},
                         {"workload", workload_json(scheduler_.mix(), scheduler_.observed())},
                         {"nodes", std::move(nodes)},
                         {"allocations", std::move(allocations)},
                         {"waiting", scheduler_.waiting()},
                         {"drain", drain_json(scheduler_.drain())},
                         {"roomHolds", holds_json(scheduler_.holds())}});
}

std::string Extender::metrics_text() const {
  // Both read the scheduler's live summary: a scrape never walks the model (issue 13).
  placement::ClusterSummary summary = scheduler_.summary();
  metrics_.update_cluster(summary);
  metrics_.note_mix_version(scheduler_.mix_version());
  const MixStatus mix{static_cast<double>(scheduler_.observed()), metrics_.mix_age_seconds()};
  std::vector<prometheus::MetricFamily> families = cluster_families(summary, mix);
  for (auto& f : quota_families(scheduler_.quota_rows())) families.push_back(std::move(f));
  const WaitStatus wait{static_cast<double>(scheduler_.waiting()),
                        scheduler_.drain().has_value() ? 1.0 : 0.0,
                        static_cast<double>(scheduler_.holds().size())};
  for (auto& f : waiting_families(wait)) families.push_back(std::move(f));
  return metrics_.serialize(std::move(families));
}

}  // namespace gapless::server
