// random: the FGD paper's Random baseline. Its simulator draws one feasible node uniformly and
// scores it 100, the rest 0. Here every node gets a pseudo-random score from the pod's draw and
// the node's name, so the best one is a uniform pick among the feasible nodes; a share goes to a
// random GPU that fits (drawn the same way), whole GPUs to the lowest free indices.
// With draw 0 (no driver setting it) the order is fixed per node name.
#include <functional>
#include <string>

#include "strategies.h"

namespace gapless::placement {
namespace {

// SplitMix64's finaliser: a well-mixed 64-bit hash of x.
std::uint64_t mix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

double unit(std::uint64_t x) {
  return static_cast<double>(mix64(x) >> 11) * 0x1.0p-53;
}

std::uint64_t node_key(std::uint64_t draw, const model::Node& node) {
  return mix64(draw ^ std::hash<std::string>{}(node.name));
}

}  // namespace

double RandomStrategy::score_node_in(const ScoreContext& ctx, const model::Node& node,
                                     const model::GpuRequest&) const {
  return unit(node_key(ctx.draw, node));
}

double RandomStrategy::score_gpu_in(const ScoreContext& ctx, const model::Node& node,
                                    const model::Gpu& gpu, const model::GpuRequest& req) const {
  if (req.kind == model::RequestKind::kWhole) return 1.0;
  return unit(node_key(ctx.draw, node) + static_cast<std::uint64_t>(gpu.index) + 1);
}

double RandomStrategy::score_node(const model::Node& node, const model::GpuRequest& req) const {
  return score_node_in(ScoreContext{}, node, req);
}

double RandomStrategy::score_gpu(const model::Node& node, const model::Gpu& gpu,
                                 const model::GpuRequest& req) const {
  return score_gpu_in(ScoreContext{}, node, gpu, req);
}

}  // namespace gapless::placement
