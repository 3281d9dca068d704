// Searching GPU sets inside one node. Private to placement.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "gapless/model/node.h"
#include "gapless/model/request.h"
#include "gapless/placement/profile.h"

namespace gapless::placement {

struct GpuSet {
  std::vector<int> gpus;      // GPU indices, ascending
  double gpu_score = 0.0;     // mean GPU-level score
  double connectivity = 1.0;  // mean pair link weight / Link::kMaxWeight, capped at 1
  // How much of the node's largest free NVLink clique survives, relative to what taking k GPUs
  // must cost: 1 - (clique before - clique after) / k. 1 on nodes without NVLink.
  double island_kept = 1.0;
};

// Size of the largest set of GPUs in `candidates` (bit i = GPU i) whose pairs are all NVLink.
int max_nvlink_clique(const model::LinkGraph& links, std::uint64_t candidates);

// Mean link weight / Link::kMaxWeight over all pairs of `gpus` (1.0 for fewer than two).
double connectivity(const model::Node& node, const std::vector<int>& gpus);
// Every pair of `gpus` is NVLink-connected.
bool all_nvlink(const model::Node& node, const std::vector<int>& gpus);

// Is there a k-subset of `candidates` (bit i = GPU i) whose pairs are all NVLink-connected?
bool nvlink_clique_exists(const model::LinkGraph& links, std::uint64_t candidates, int k);

// Best set of `k` GPUs out of `candidates` (ascending indices) with per-GPU scores `scores`
// (aligned with candidates), ranked by summed link weight (when the wish is not kNone), then mean
// score, then the NVLink clique left free. kNvlinkRequired admits only all-NVLink sets.
// Exhaustive for small searches, greedy growth from every seed beyond that.
// With `break_ties`, sets with an equal objective are told apart by the NVLink clique they leave
// free (largest wins), so a pick breaks as few islands as possible; node scoring skips that work.
std::optional<GpuSet> best_set(const model::Node& node, const std::vector<int>& candidates,
                               const std::vector<double>& scores, int k, model::TopologyWish wish,
                               const Profile& profile, bool break_ties = false);

}  // namespace gapless::placement
