// bestfit: the FGD paper's BestFit baseline. What the pod would leave free on the node, CPU and
// GPU, each divided by the largest node's capacity and weighted one half:
// s = (cpu_left - cpu) / 128 cores / 2 + (gpu_left - gpu) / 8 GPUs / 2, score = int(100 (1 - s)).
// (The simulator then min-max normalises over the feasible nodes, which keeps the order and
// the ties, so it is left out.) GPUs inside the node: best fit.
#include "gapless/placement/demand.h"
#include "strategies.h"

namespace gapless::placement {

double BestFitStrategy::score_node(const model::Node& node, const model::GpuRequest& req) const {
  const double gpu_asked = static_cast<double>(req.units()) * milli_per_gpu(node, req);
  double s = 0;
  s += (cpu_left(node) - cpu_asked(node, req)) / kMaxSpecCpuMilli * 0.5;
  s += (free_milli(node) - gpu_asked) / kMaxSpecGpuMilli * 0.5;
  return hundredths(static_cast<long long>((1.0 - s) * 100));
}

double BestFitStrategy::score_gpu(const model::Node& node, const model::Gpu& gpu,
                                  const model::GpuRequest& req) const {
  return tightest_gpu(node, gpu, req);
}

}  // namespace gapless::placement
