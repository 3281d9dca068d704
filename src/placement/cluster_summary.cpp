#include "gapless/placement/cluster_summary.h"

#include <algorithm>

#include "node_search.h"

namespace gapless::placement {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

bool shared(const model::GpuUsage& u) {
  return u.shared_pods > 0;
}

void add_gpu(ModelSummary& s, const model::Gpu& g) {
  const model::GpuUsage& u = g.used;
  s.gpus += 1;
  if (u.whole) s.gpus_whole += 1;
  if (g.mig.enabled) return;
  s.shared_memory_capacity_bytes += static_cast<double>(g.memory_mib) * kMiB;
  s.shared_memory_allocated_bytes += static_cast<double>(u.memory_used_mib) * kMiB;
  s.shared_compute_capacity_milli += model::kFullComputeMilli;
  s.shared_compute_allocated_milli += u.compute_used_milli;
  if (!shared(u)) return;
  const double memory_free = static_cast<double>(g.memory_mib - u.memory_used_mib) * kMiB;
  const double compute_free = g.compute_free_milli();
  if (compute_free <= 0 && memory_free > 0) s.shared_memory_stranded_bytes += memory_free;
  if (memory_free <= 0 && compute_free > 0) s.shared_compute_stranded_milli += compute_free;
}

void add_mig(std::map<std::string, MigSummary>& mig, const model::Node& n) {
  for (const model::Gpu& g : n.gpus) {
    for (std::size_t i = 0; i < g.mig.instances.size(); ++i) {
      MigSummary& m = mig[g.mig.instances[i].profile];
      m.capacity += 1;
      const auto& used = g.used.mig_instance_used;
      if (i < used.size() && used[i]) m.allocated += 1;
    }
  }
  for (const auto& [profile, pool] : n.mig_pool) {
    mig[profile].capacity += pool.total;
    mig[profile].allocated += pool.used;
  }
}

void add_node(ClusterSummary& out, const model::Node& n, const FragmentCache& fragments) {
  bool all_idle = !n.gpus.empty();
  for (const model::Gpu& g : n.gpus) {
    add_gpu(out.models[g.model], g);
    all_idle = all_idle && g.used.idle();
  }
  ModelSummary& s = out.models[n.gpus.empty() ? std::string() : n.gpus.front().model];
  s.nodes += 1;
  if (all_idle && !n.fenced()) s.free_nodes += 1;
  s.fragment_milli += fragments.fragment(n);
  s.stranded_milli += fragments.stranding(n);
  add_mig(out.mig, n);
  const auto k = static_cast<std::size_t>(largest_free_nvlink_set(n));
  ++out.largest_free_nvlink_set[std::min(k, kMaxSetBucket + 1)];
  out.largest_free_nvlink_set_sum += static_cast<double>(k);
}

}  // namespace

int largest_free_nvlink_set(const model::Node& node) {
  if (node.fenced()) return 0;
  std::uint64_t free = 0;
  const std::size_t count = std::min<std::size_t>(node.gpus.size(), 64);
  for (std::size_t i = 0; i < count; ++i) {
    const model::Gpu& g = node.gpus[i];
    if (g.healthy && g.used.idle() && !g.mig.enabled) free |= std::uint64_t{1} << i;
  }
  if (free == 0) return 0;
  if (static_cast<std::size_t>(node.links.size()) != node.gpus.size()) return 1;
  return std::max(1, max_nvlink_clique(node.links, free));
}

ClusterSummary summarize(std::span<const model::Node* const> nodes,
                         const FragmentCache& fragments) {
  ClusterSummary out;
  for (const model::Node* n : nodes) add_node(out, *n, fragments);
  return out;
}

}  // namespace gapless::placement
