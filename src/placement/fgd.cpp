// fgd: Fragmentation Gradient Descent (Weng et al., USENIX ATC '23). A placement is judged by
// how much it grows the node's expected fragmentation F_n(M) under the workload mix M (see
// fragmentation.h): delta = F_n(M) - F_n'(M), score = int(100 * sigmoid(delta / 1000)). A share
// tries every GPU that fits and keeps the first with the best score; whole GPUs are the lowest
// free indices. The integer truncation is the paper's: it makes small differences ties, which
// fall back to node order.
//
// The mix comes from ScoreContext::workload; without one, the request's own shape is the whole
// mix (placements are then judged by what they leave for more pods like this one).
#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

#include "gapless/placement/demand.h"
#include "gapless/placement/fragmentation.h"
#include "strategies.h"

namespace gapless::placement {
namespace {

// F_n(M) before, and after `gpus`, under the context's mix (or the request's own shape).
class Measure {
 public:
  Measure(const ScoreContext& ctx, const model::GpuRequest& req) : ctx_(ctx) {
    if (ctx.workload == nullptr) own_.entries.push_back({shape_of(req), 1.0});
  }
  double before(const model::Node& node) const {
    if (ctx_.fragments != nullptr) return ctx_.fragments->fragment(node);
    return node_fragment(node, mix());
  }
  double after(const model::Node& node, const model::GpuRequest& req,
               std::span<const int> gpus) const {
    if (ctx_.fragments != nullptr) return ctx_.fragments->fragment_after(node, req, gpus);
    return node_fragment_after(node, mix(), req, gpus);
  }

 private:
  const WorkloadMix& mix() const { return ctx_.workload ? *ctx_.workload : own_; }
  const ScoreContext& ctx_;
  WorkloadMix own_;
};

long long fgd_score(double delta) {
  return static_cast<long long>(1.0 / (1.0 + std::exp(-delta / 1000.0)) * 100);
}

bool single_share(const model::GpuRequest& req) {
  return req.kind == model::RequestKind::kShared && req.shared.count == 1;
}

}  // namespace

double FgdStrategy::score_node_in(const ScoreContext& ctx, const model::Node& node,
                                  const model::GpuRequest& req) const {
  const Measure m(ctx, req);
  const double before = m.before(node);
  if (single_share(req)) {
    long long best = -1;
    int tried_left = -1;  // GPUs with equal room give equal scores: try each room once
    std::array<int, 1> pick{};
    for (const model::Gpu& g : node.gpus) {
      if (!can_serve_now(g, req)) continue;
      const int left = free_milli(g);
      if (left == tried_left) continue;
      tried_left = left;
      pick[0] = g.index;
      best = std::max(best, fgd_score(before - m.after(node, req, pick)));
    }
    return best < 0 ? 0.0 : hundredths(best);
  }
  // Whole GPUs (and multi-GPU shares): the simulator's Sub takes the GPUs with the least room
  // that fit, lowest index first among equals.
  std::vector<int> gpus;
  if (req.kind != model::RequestKind::kNone) {
    for (const model::Gpu& g : node.gpus) {
      if (can_serve_now(g, req)) gpus.push_back(g.index);
    }
    std::stable_sort(gpus.begin(), gpus.end(), [&](int a, int b) {
      return free_milli(node.gpus[a]) < free_milli(node.gpus[b]);
    });
    gpus.resize(std::min<std::size_t>(gpus.size(), req.units()));
    std::sort(gpus.begin(), gpus.end());
  }
  return hundredths(fgd_score(before - m.after(node, req, gpus)));
}

double FgdStrategy::score_gpu_in(const ScoreContext& ctx, const model::Node& node,
                                 const model::Gpu& gpu, const model::GpuRequest& req) const {
  if (!single_share(req)) return tightest_gpu(node, gpu, req);
  const Measure m(ctx, req);
  const std::array<int, 1> pick{gpu.index};
  return hundredths(fgd_score(m.before(node) - m.after(node, req, pick)));
}

double FgdStrategy::score_node(const model::Node& node, const model::GpuRequest& req) const {
  return score_node_in(ScoreContext{}, node, req);
}

double FgdStrategy::score_gpu(const model::Node& node, const model::Gpu& gpu,
                              const model::GpuRequest& req) const {
  return score_gpu_in(ScoreContext{}, node, gpu, req);
}

}  // namespace gapless::placement
