// The placement engine: the three extender verbs as pure functions of the cluster model.
// The server and the bench call exactly these.
//
// Thread-safety: all functions only read the Cluster; callers hold at least a shared lock.
#pragma once

#include <unordered_map>
#include <string>
#include <vector>

#include "gapless/model/allocation.h"
#include "gapless/model/cluster.h"
#include "gapless/model/request.h"
#include "gapless/model/result.h"
#include "gapless/placement/fit.h"
#include "gapless/placement/profile.h"

namespace gapless::placement {

struct FilterResult {
  std::vector<std::string> passed;                             // in input order
  std::unordered_map<std::string, std::string> failed;         // full now: node -> reason
  std::unordered_map<std::string, std::string> unresolvable;   // never fits: node -> reason
  std::unordered_map<std::string, std::string> labels;         // node -> metric label
};

// Every input name ends up in exactly one of passed / failed / unresolvable (a name twice in
// the input is reported once). Unknown nodes are unresolvable. A kNone request passes all.
FilterResult filter(const model::Cluster& cluster, const model::GpuRequest& req,
                    const std::vector<std::string>& nodes);

// Node score in [0, 1] for a node the request fits, or -1 when it does not fit.
double score_node(const model::Node& node, const model::GpuRequest& req, const Profile& profile);

// score_node for a node that passed filter, as the trace bench ranks nodes: the GPU pick is
// skipped when the profile gives it no weight (gpu weight 0, no topology term), since it cannot
// change the score, and a request without GPUs (the trace's CPU-only pods, which carry host
// resources) is ranked by the node-level strategies instead of scored 0.
// REQUIRES: quick_fit(node, req) fits.
double score_fitting_node(const model::Node& node, const model::GpuRequest& req,
                          const Profile& profile);

// One 0..10 score per input name, aligned with `nodes` (0 for unknown or infeasible nodes).
std::vector<int> prioritize(const model::Cluster& cluster, const model::GpuRequest& req,
                            const Profile& profile, const std::vector<std::string>& nodes);

// The allocation the pod would get on `node` now, or why it cannot.
Result<model::Allocation> place(const model::Cluster& cluster, const model::GpuRequest& req,
                                const Profile& profile, const model::PodInfo& pod,
                                const std::string& node);

}  // namespace gapless::placement
