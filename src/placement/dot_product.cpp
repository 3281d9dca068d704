// dotprod: the FGD paper's DotProd baseline (Tetris). Node and pod are vectors of (CPU, GPU),
// each divided by the largest node's capacity; the smaller their dot product, the better the
// node: score = int(100 * (1 - node.pod / 2)). It favours nodes with little left of what the pod
// needs. GPUs inside the node: best fit.
#include "gapless/placement/demand.h"
#include "strategies.h"

namespace gapless::placement {

double DotProductStrategy::score_node(const model::Node& node, const model::GpuRequest& req) const {
  const double node_cpu = cpu_left(node) / kMaxSpecCpuMilli;
  const double node_gpu = free_milli(node) / kMaxSpecGpuMilli;
  const double pod_cpu = cpu_asked(node, req) / kMaxSpecCpuMilli;
  const double pod_gpu =
      static_cast<double>(req.units()) * milli_per_gpu(node, req) / kMaxSpecGpuMilli;
  const double dot = (node_cpu * pod_cpu + node_gpu * pod_gpu) / 2;
  return hundredths(static_cast<long long>(100 * (1 - dot)));
}

double DotProductStrategy::score_gpu(const model::Node& node, const model::Gpu& gpu,
                                     const model::GpuRequest& req) const {
  return tightest_gpu(node, gpu, req);
}

}  // namespace gapless::placement
