// Which concrete GPUs, shares or MIG placements a pod gets inside one node.
#pragma once

#include <optional>
#include <vector>

#include "gapless/model/allocation.h"
#include "gapless/model/node.h"
#include "gapless/model/request.h"
#include "gapless/placement/profile.h"

namespace gapless::placement {

struct Choice {
  std::vector<model::GpuGrant> gpus;
  std::vector<model::MigGrant> mig;
  double gpu_score = 0.0;  // GPU-level strategies' mean score of the picked GPUs, 0..1
  double connectivity =
      1.0;  // mean pair link weight / Link::kMaxWeight, capped at 1 (1 for one GPU)
};

// The best pick under the profile's GPU-level strategies and topology weight, or nullopt when
// the request does not fit the node now. Deterministic: ties go to the lowest GPU index / start.
std::optional<Choice> choose(const model::Node& node, const model::GpuRequest& req,
                             const Profile& profile);

// The GPU-level score and connectivity of the best pick, without building its grants (node
// scoring does this for every candidate node). Returns false when nothing fits now.
// `island_kept`, if given, gets how much of the node's largest free NVLink island the pick leaves
// (1 - (clique before - clique after) / k; 1 without NVLink): the pick is then the one choose()
// would make, ties broken towards the largest island left.
bool score_pick(const model::Node& node, const model::GpuRequest& req, const Profile& profile,
                double* gpu_score, double* connectivity, double* island_kept = nullptr);

// GPU-level score of one GPU under the profile (weighted mean of its gpu strategies).
double gpu_level_score(const Profile& profile, const model::Node& node, const model::Gpu& gpu,
                       const model::GpuRequest& req);

}  // namespace gapless::placement
