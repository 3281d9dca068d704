// bundle: pack. Prefer the fullest node and, inside it, the fullest GPU that fits, so whole
// nodes and whole GPUs stay free for the large requests that need them.
#include "strategies.h"

namespace gapless::placement {

double BundleStrategy::score_node(const model::Node& node, const model::GpuRequest& req) const {
  return node_fill_after(node, req);
}

double BundleStrategy::score_gpu(const model::Node& node, const model::Gpu& gpu,
                                 const model::GpuRequest& req) const {
  // A whole GPU is always empty; what differs is its neighbourhood. Taking the one whose peers
  // are already busy keeps intact NVLink islands / NUMA halves for multi-GPU pods.
  if (req.kind == model::RequestKind::kWhole) return busy_peer_fraction(node, gpu);
  if (req.kind == model::RequestKind::kShared) return balanced_fill_after(gpu, req);
  return gpu_fill_after(gpu, req);
}

}  // namespace gapless::placement
