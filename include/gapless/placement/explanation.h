// What each extension point says about one node for one pod: Scheduler::explain's answer,
// assembled by explain_nodes from what the runner computed without caches.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gapless/model/allocation.h"
#include "gapless/model/cluster.h"
#include "gapless/model/request.h"
#include "gapless/placement/engine.h"
#include "gapless/placement/profile.h"

namespace gapless::placement {

// What the stages say about one node for one pod (Scheduler::explain).
struct NodeExplanation {
  enum class Verdict { kPassed, kFailed, kUnresolvable };
  std::string node;
  Verdict verdict = Verdict::kPassed;
  std::string reason;        // filter's reason; empty when passed
  std::string reason_label;  // its metric label
  ScoreBreakdown score;      // passed only: the engine score's terms and total (raw score)
  int normalized = 0;        // passed only: NormalizeScore's 0..10 among the passing nodes
  std::optional<model::Allocation> placement;  // passed only: what reserve would commit
  std::string placement_error;                 // passed, yet place() found nothing (a bug)
};

// One explanation per distinct name of `nodes` (input order). REQUIRES: the model `cluster`
// held still (the runner's read lock); `filtered` is filter's answer for `nodes` and `raw` the
// score of each of them (-1: narrowed out), both computed without caches. `fit` is `req` as the
// pick sees it (host resources cleared when they are not checked), `drawn` the profile with the
// pod's draw.
std::vector<NodeExplanation> explain_nodes(const model::Cluster& cluster, const model::PodInfo& pod,
                                           const model::GpuRequest& req,
                                           const model::GpuRequest& fit, const Profile& drawn,
                                           const std::vector<std::string>& nodes,
                                           const FilterResult& filtered,
                                           const std::vector<double>& raw);

}  // namespace gapless::placement
