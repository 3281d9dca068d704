// Measures shared by the strategies.
#include <algorithm>
#include <bit>

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
      const double m =
          gpu.memory_mib > 0 ? static_cast<double>(req.shared.memory_mib) / gpu.memory_mib : 0.0;
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
    default:
      add = 1.0;
  }
  return std::min(1.0, gpu_fill(gpu) + add);
}

double balanced_fill_after(const model::Gpu& gpu, const model::GpuRequest& req) {
  // A share that bounds only one dimension leaves the other to whoever asks: nothing to balance.
  if (req.kind != model::RequestKind::kShared || req.shared.memory_mib <= 0 ||
      req.shared.compute_milli <= 0 || gpu.memory_mib <= 0 || gpu.used.whole) {
    return gpu_fill_after(gpu, req);
  }
  const double memory =
      static_cast<double>(gpu.used.memory_used_mib + req.shared.memory_mib) / gpu.memory_mib;
  const double compute =
      static_cast<double>(gpu.used.compute_used_milli + req.shared.compute_milli) /
      model::kFullComputeMilli;
  const double low = std::min(1.0, std::min(memory, compute));
  const double high = std::min(1.0, std::max(memory, compute));
  return 0.75 * low + 0.25 * high;
}

double busy_peer_fraction(const model::Node& node, const model::Gpu& gpu) {
  std::uint64_t busy = 0, numa = 0;
  for (const model::Gpu& o : node.gpus) {
    if (!o.used.idle() || !o.usable()) busy |= std::uint64_t{1} << o.index;
    if (gpu.numa >= 0 && o.numa == gpu.numa) numa |= std::uint64_t{1} << o.index;
  }
  const std::uint64_t self = std::uint64_t{1} << gpu.index;
  std::uint64_t peers = gpu.index < node.links.size() ? node.links.nvlink_mask(gpu.index) : 0;
  if (peers == 0) peers = numa & ~self;
  if (peers == 0)
    peers =
        (node.gpus.size() >= 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << node.gpus.size()) - 1) &
        ~self;
  const int n = std::popcount(peers);
  return n == 0 ? 0.0 : static_cast<double>(std::popcount(peers & busy)) / n;
}

double tightest_gpu(const model::Node& node, const model::Gpu& gpu, const model::GpuRequest& req) {
  if (req.kind == model::RequestKind::kWhole) return 1.0;
  const int left = free_milli(gpu) - milli_per_gpu(node, req);
  return 1.0 - std::max(0, left) / static_cast<double>(model::kFullComputeMilli);
}

}  // namespace gapless::placement
