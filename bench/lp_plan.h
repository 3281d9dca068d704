// The offline packing's first step (offline_pack.h): a placement planned from the LP's optimum
// (lp_bound.h). Per node type, the pods the optimum puts there (rounded down), their shares
// packed onto GPUs best-fit decreasing, then those GPUs and the whole-GPU pods put onto that
// type's nodes best-fit by CPU, memory and GPUs. What does not fit is left to the caller.
#pragma once

#include <cstddef>
#include <vector>

#include "limit.h"
#include "lp_bound.h"

namespace gapless::bench {

struct PlannedPod {
  int pod = 0;            // index into the Workload
  std::size_t node = 0;   // index into the nodes
  std::vector<int> gpus;  // GPU indices on it: the whole GPUs, or the one GPU of a share
};

// REQUIRES: `in` made from these nodes; lp solved for `in` (an empty plan if it failed).
std::vector<PlannedPod> plan_from_lp(const std::vector<model::Node>& nodes, const Workload& w,
                                     const LimitInstance& in, const LpBound& lp);

}  // namespace gapless::bench
