// spread: balance. Prefer the emptiest node and the emptiest GPU, to limit interference between
// pods (inference serving, noisy neighbours) at the cost of packing.
#include "strategies.h"

namespace gapless::placement {

double SpreadStrategy::score_node(const model::Node& node, const model::GpuRequest& req) const {
  return 1.0 - node_fill_after(node, req);
}

double SpreadStrategy::score_gpu(const model::Node& node, const model::Gpu& gpu,
                                 const model::GpuRequest& req) const {
  if (req.kind == model::RequestKind::kWhole) return 1.0 - busy_peer_fraction(node, gpu);
  return 1.0 - gpu_fill_after(gpu, req);
}

}  // namespace gapless::placement
