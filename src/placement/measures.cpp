// Measures shared by the strategies.
#include <algorithm>

#include "gapless/placement/demand.h"
#include "strategies.h"

namespace gapless::placement {

double node_fill_after(const model::Node& node, const model::GpuRequest& req) {
  const model::NodeFill f = model::node_fill(node);
  if (f.gpus == 0) return 0.0;
  return std::min(1.0, (f.used + demand_in_gpus(node, req)) / f.gpus);
}

double gpu_fill_after(const model::Gpu& gpu, const model::GpuRequest& req) {
  double add = 0.0;
  switch (req.kind) {
    case model::RequestKind::kShared: {
      const double c = static_cast<double>(req.shared.compute_milli) / model::kFullComputeMilli;
      const double m = gpu.memory_mib > 0
                           ? static_cast<double>(req.shared.memory_mib) / gpu.memory_mib
                           : 0.0;
      add = std::max(c, m);
      break;
    }
    case model::RequestKind::kGpushare:
      add = gpu.gpushare_capacity > 0
                ? static_cast<double>(req.gpushare_units) / gpu.gpushare_capacity
                : 1.0;
      break;
    case model::RequestKind::kMig:
      if (const auto* p = model::find_mig_profile(gpu.mig_family, req.mig_profile)) {
        add = static_cast<double>(p->compute_slices) / model::kMigComputeSlices;
      }
      break;
    default: add = 1.0;
  }
  return std::min(1.0, gpu_fill(gpu) + add);
}

double busy_peer_fraction(const model::Node& node, const model::Gpu& gpu) {
  int peers = 0, busy = 0;
  auto count = [&](auto&& is_peer) {
    for (const model::Gpu& other : node.gpus) {
      if (other.index == gpu.index || !is_peer(other)) continue;
      ++peers;
      if (!other.used.idle() || !other.healthy) ++busy;
    }
  };
  const int n = node.links.size();
  if (gpu.index < n && node.links.nvlink_degree(gpu.index) > 0) {
    count([&](const model::Gpu& o) { return o.index < n && node.links.get(gpu.index, o.index).is_nvlink(); });
  } else if (gpu.numa >= 0) {
    count([&](const model::Gpu& o) { return o.numa == gpu.numa; });
  }
  if (peers == 0) count([](const model::Gpu&) { return true; });
  return peers == 0 ? 0.0 : static_cast<double>(busy) / peers;
}

}  // namespace gapless::placement
