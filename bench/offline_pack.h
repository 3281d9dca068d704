// The limit's offline packing (bench/README.md, "The limit"): an achievable placement of the pods
// that have arrived at 100 %, made knowing all of them in advance; the best of two starts, each
// then repaired by a local search (offline_repair.h):
// - lp-plan: the plan the LP's optimum suggests (lp_plan.h), then every pod it left out, largest
//   GPU ask first, on the fitting node where it leaves the least room (best fit decreasing).
//   Each pod passes placement::quick_fit on its node and is committed to a model::Cluster,
//   which refuses any over-commitment.
// - engine-lp-first: the engine's gapless strategy placing online (bench/placer.h), the pods
//   the LP's optimum places submitted first, the others after.
// Every packing, repaired or not, becomes a result only by being committed pod by pod to a fresh
// model::Cluster through quick_fit and checked again at the end: the GPU milli the nodes hold
// equal the allocations' sum, and every pod sits on a GPU model it allows. A repaired packing
// that failed this would give way to its start.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gapless/model/node.h"
#include "limit.h"
#include "lp_bound.h"
#include "replay.h"

namespace gapless::bench {

struct OfflinePacking {
  std::int64_t allocated_milli = 0;  // GPU milli held by the placed pods
  int placed = 0, dropped = 0;
  std::string method;  // which packing won: "lp-plan" or "engine-lp-first"
  std::string error;   // set when the placement failed its checks (allocated_milli is then 0)
};

// Places in.pods on `nodes`, guided by `lp` (solved for `in`; without an optimum, best fit
// decreasing alone). REQUIRES: `in` made from these nodes and this workload.
OfflinePacking offline_pack(const std::vector<model::Node>& nodes, const Workload& w,
                            const LimitInstance& in, const LpBound& lp);

}  // namespace gapless::bench
