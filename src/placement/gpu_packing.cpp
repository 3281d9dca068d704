// packing: the FGD paper's GpuPacking baseline. Preference, highest first:
//   1. the pod fits on GPUs already in use: 100 - (sum over them of left% / 10), at least 50;
//   2. it must take free GPUs of a node already in use: 50 - free GPUs taken, at least 33;
//   3. the node is empty: max(33 - its GPUs, its GPUs), so the smallest empty node first.
// The GPUs it would take are the tightest ones that fit. Pods without GPUs score 0 everywhere.
// GPUs inside the node: best fit.
#include <algorithm>
#include <array>

#include "gapless/placement/demand.h"
#include "strategies.h"

namespace gapless::placement {

double GpuPackingStrategy::score_node(const model::Node& node, const model::GpuRequest& req) const {
  if (req.kind == model::RequestKind::kNone) return 0.0;
  constexpr int kFull = model::kFullComputeMilli;
  const int n = std::min<int>(static_cast<int>(node.gpus.size()), model::LinkGraph::kMaxGpus);
  std::array<int, model::LinkGraph::kMaxGpus> left{}, order{};
  int fully_free = 0;
  for (int i = 0; i < n; ++i) {
    left[i] = free_milli(node.gpus[i]);
    order[i] = i;
    if (left[i] == kFull) ++fully_free;
  }
  if (fully_free == n) return hundredths(std::max(33 - fully_free, fully_free));

  std::stable_sort(order.begin(), order.begin() + n,
                   [&](int a, int b) { return left[a] < left[b]; });
  const int milli = milli_per_gpu(node, req);
  int wanted = req.units(), free_taken = 0, left_pct = 0;
  for (int k = 0; k < n && wanted > 0; ++k) {
    const int g = order[k];
    if (left[g] < milli || !can_serve(node.gpus[g], req)) continue;
    --wanted;
    if (left[g] == kFull) ++free_taken;
    left_pct += left[g] * 100 / kFull;
  }
  if (free_taken > 0) return hundredths(std::max(50 - free_taken, 33));
  return hundredths(std::max(100 - left_pct / 10, 50));
}

double GpuPackingStrategy::score_gpu(const model::Node& node, const model::Gpu& gpu,
                                     const model::GpuRequest& req) const {
  return tightest_gpu(node, gpu, req);
}

}  // namespace gapless::placement
