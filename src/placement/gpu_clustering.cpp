// clustering: the FGD paper's GpuClustering baseline. A pod's tag is "share" or its whole-GPU
// count; a node's tags are those of the GPU pods on it. Same tag alone on the node: 75 + fill,
// same tag among others: 50 + fill, a node without GPU pods: 25 + fill, other tags only: fill,
// where fill = 25 * (8000 - milli-GPU left) / 8000 in integers. Pods without GPUs score 0
// everywhere. GPUs inside the node: best fit.
#include <algorithm>
#include <bit>

#include "gapless/placement/demand.h"
#include "strategies.h"

namespace gapless::placement {
namespace {

// Bit 0: share pods; bit k (1..63): pods holding k whole GPUs.
std::uint64_t node_tags(const model::Node& node) {
  std::uint64_t tags = 0;
  for (const model::Gpu& g : node.gpus) {
    if (g.used.shared_pods > 0 || g.used.gpushare_used > 0) tags |= 1;
  }
  for (const auto& [k, pods] : node.whole_pods) {
    if (pods > 0) tags |= std::uint64_t{1} << std::clamp(k, 1, 63);
  }
  return tags;
}

std::uint64_t pod_tag(const model::GpuRequest& req) {
  if (req.kind == model::RequestKind::kWhole)
    return std::uint64_t{1} << std::clamp(req.whole, 1, 63);
  return 1;
}

}  // namespace

double GpuClusteringStrategy::score_node(const model::Node& node,
                                         const model::GpuRequest& req) const {
  if (req.kind == model::RequestKind::kNone) return 0.0;
  const long long fill =
      std::max(0LL, 25LL * (static_cast<long long>(kMaxSpecGpuMilli) - free_milli(node)) /
                        static_cast<long long>(kMaxSpecGpuMilli));
  const std::uint64_t tags = node_tags(node), mine = pod_tag(req);
  long long base = 0;
  if (tags & mine) {
    base = std::popcount(tags) == 1 ? 75 : 50;
  } else if (tags == 0) {
    base = 25;
  }
  return hundredths(base + fill);
}

double GpuClusteringStrategy::score_gpu(const model::Node& node, const model::Gpu& gpu,
                                        const model::GpuRequest& req) const {
  return tightest_gpu(node, gpu, req);
}

}  // namespace gapless::placement
