// The linear program behind the limit's lower bound (bench/README.md, "The limit"). Variables:
// pods of each shape on nodes of each type, and per type an arc flow over the positions 0..1000
// milli of one GPU in steps of the shares' common divisor, whose paths are the ways to fill one
// GPU with shares. Maximizes the GPU milli allocated subject to: each shape at most as often as
// it arrived; per type its CPU, memory and GPU count; shares exactly as many as the flow's arcs
// of their size. Every real placement maps onto a feasible point, so the optimum bounds them all.
// Solved with COIN-OR CLP.
#pragma once

#include <string>
#include <vector>

#include "limit.h"

namespace gapless::bench {

struct LpBound {
  double allocated_milli = 0;  // the optimum, an upper bound on any placement's GPU milli
  // Pods of shape s placed on nodes of type t in the optimum: placed[s * types + t].
  std::vector<double> placed;
  int columns = 0, rows = 0;
  double seconds = 0;
  std::string error;  // the solver's status when it did not reach an optimum
};

LpBound solve_lp_bound(const LimitInstance& in);

}  // namespace gapless::bench
