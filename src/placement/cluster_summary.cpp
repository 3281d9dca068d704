#include "gapless/placement/cluster_summary.h"

#include <algorithm>
#include <cmath>

#include "node_search.h"

namespace gapless::placement {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

// Rounded to a multiple of 1/1024: sums of such values are exact in a double, in any order.
double dyadic(double milli) {
  return std::round(milli * 1024.0) / 1024.0;
}

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

void add_counts(ClusterSummary& out, const model::Node& n) {
  (n.fenced() ? out.nodes_fenced : out.nodes_ready) += 1;
  for (const model::Gpu& g : n.gpus) {
    const model::GpuUsage& u = g.used;
    (g.healthy ? out.gpus_healthy : out.gpus_unhealthy) += 1;
    if (u.whole) out.gpus_in_use_whole += 1;
    if (u.shared_pods > 0 || u.gpushare_used > 0) out.gpus_in_use_shared += 1;
    if (u.mig_slices_used != 0) out.gpus_in_use_mig += 1;
    out.vram_allocated_bytes += static_cast<double>(u.memory_used_mib) * kMiB;
  }
}

void add_node(ClusterSummary& out, const model::Node& n, const FragmentCache& fragments) {
  add_counts(out, n);
  bool all_idle = !n.gpus.empty();
  for (const model::Gpu& g : n.gpus) {
    add_gpu(out.models[g.model], g);
    all_idle = all_idle && g.used.idle();
  }
  ModelSummary& s = out.models[n.gpus.empty() ? std::string() : n.gpus.front().model];
  s.nodes += 1;
  if (all_idle && !n.fenced()) s.free_nodes += 1;
  s.fragment_milli += dyadic(fragments.fragment(n));
  s.stranded_milli += dyadic(fragments.stranding(n));
  add_mig(out.mig, n);
  const auto k = static_cast<std::size_t>(largest_free_nvlink_set(n));
  ++out.largest_free_nvlink_set[std::min(k, kMaxSetBucket + 1)];
  out.largest_free_nvlink_set_sum += static_cast<double>(k);
}

// into += sign * part, field by field; entries that fall to all-zero are dropped, so a summary
// kept by adding and subtracting nodes has exactly the keys a fresh one would.
void accumulate(ClusterSummary& into, const ClusterSummary& part, double sign) {
  for (double ClusterSummary::*f :
       {&ClusterSummary::gpus_healthy, &ClusterSummary::gpus_unhealthy,
        &ClusterSummary::gpus_in_use_whole, &ClusterSummary::gpus_in_use_shared,
        &ClusterSummary::gpus_in_use_mig, &ClusterSummary::vram_allocated_bytes,
        &ClusterSummary::nodes_ready, &ClusterSummary::nodes_fenced,
        &ClusterSummary::largest_free_nvlink_set_sum}) {
    into.*f += sign * part.*f;
  }
  for (const auto& [model, m] : part.models) {
    ModelSummary& t = into.models[model];
    for (double ModelSummary::*f :
         {&ModelSummary::fragment_milli, &ModelSummary::stranded_milli, &ModelSummary::nodes,
          &ModelSummary::free_nodes, &ModelSummary::gpus, &ModelSummary::gpus_whole,
          &ModelSummary::shared_memory_capacity_bytes, &ModelSummary::shared_memory_allocated_bytes,
          &ModelSummary::shared_compute_capacity_milli,
          &ModelSummary::shared_compute_allocated_milli,
          &ModelSummary::shared_memory_stranded_bytes,
          &ModelSummary::shared_compute_stranded_milli}) {
      t.*f += sign * m.*f;
    }
    if (t.nodes == 0 && t.gpus == 0) into.models.erase(model);
  }
  for (const auto& [profile, m] : part.mig) {
    MigSummary& t = into.mig[profile];
    t.capacity += sign * m.capacity;
    t.allocated += sign * m.allocated;
    if (t.capacity == 0 && t.allocated == 0) into.mig.erase(profile);
  }
  for (std::size_t k = 0; k < part.largest_free_nvlink_set.size(); ++k) {
    into.largest_free_nvlink_set[k] +=
        sign > 0 ? part.largest_free_nvlink_set[k] : -part.largest_free_nvlink_set[k];
  }
}

}  // namespace

int largest_free_nvlink_set(const model::Node& node) {
  if (node.fenced()) return 0;
  std::uint64_t free = 0;
  const std::size_t count = std::min<std::size_t>(node.gpus.size(), 64);
  for (std::size_t i = 0; i < count; ++i) {
    const model::Gpu& g = node.gpus[i];
    if (g.usable() && g.used.idle() && !g.mig.enabled) free |= std::uint64_t{1} << i;
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

void LiveSummary::rebuild(std::span<const model::Node* const> nodes,
                          const FragmentCache& fragments) {
  per_node_.clear();
  total_ = ClusterSummary{};
  for (const model::Node* n : nodes) refresh_node(*n, fragments);
}

void LiveSummary::refresh_node(const model::Node& node, const FragmentCache& fragments) {
  ClusterSummary& mine = per_node_[&node];
  accumulate(total_, mine, -1);
  mine = ClusterSummary{};
  add_node(mine, node, fragments);
  accumulate(total_, mine, +1);
}

void LiveSummary::refresh_fragments(const FragmentCache& fragments) {
  for (auto& [node, mine] : per_node_) {
    const model::Node& n = *node;
    ModelSummary& own = mine.models[n.gpus.empty() ? std::string() : n.gpus.front().model];
    ModelSummary& sum = total_.models[n.gpus.empty() ? std::string() : n.gpus.front().model];
    const double fragment = dyadic(fragments.fragment(n));
    const double stranded = dyadic(fragments.stranding(n));
    sum.fragment_milli += fragment - own.fragment_milli;
    sum.stranded_milli += stranded - own.stranded_milli;
    own.fragment_milli = fragment;
    own.stranded_milli = stranded;
  }
}

void LiveSummary::erase(const model::Node* node) {
  auto it = per_node_.find(node);
  if (it == per_node_.end()) return;
  accumulate(total_, it->second, -1);
  per_node_.erase(it);
}

}  // namespace gapless::placement
