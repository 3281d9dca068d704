// Choosing MIG instances. Private to placement.
#pragma once

#include <optional>
#include <vector>

#include "gapless/model/allocation.h"
#include "gapless/model/node.h"
#include "gapless/model/request.h"
#include "gapless/placement/profile.h"

namespace gapless::placement {

struct MigPick {
  std::vector<model::MigGrant> grants;
  double gpu_score = 0.0;  // mean GPU-level score of the GPUs the instances land on
};

// Picks req.mig_count instances of req.mig_profile one after another, each time preferring:
// an instance that already exists (static layout) over carving a reconfigurable GPU; then the
// GPU the profile's GPU-level strategies like best (bundle: the busiest); then, on a
// reconfigurable GPU, the start that leaves the most large profiles placeable.
// Instances counted only in the node's MigPool are used when the node has no better source.
std::optional<MigPick> choose_mig(const model::Node& node, const model::GpuRequest& req,
                                  const Profile& profile);

// The most instances of req.mig_profile the node could hold if it were empty (for "never fits").
int mig_capacity_when_empty(const model::Node& node, const model::GpuRequest& req);

}  // namespace gapless::placement
