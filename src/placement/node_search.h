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
  double connectivity = 1.0;  // mean pair link weight / 100
};

// Mean link weight / 100 over all pairs of `gpus` (1.0 for fewer than two).
double connectivity(const model::Node& node, const std::vector<int>& gpus);
// Every pair of `gpus` is NVLink-connected.
bool all_nvlink(const model::Node& node, const std::vector<int>& gpus);

// Is there a k-subset of `candidates` (bit i = GPU i) whose pairs are all NVLink-connected?
bool nvlink_clique_exists(const model::LinkGraph& links, std::uint64_t candidates, int k);

// Best set of `k` GPUs out of `candidates` (ascending indices) with per-GPU scores `scores`
// (aligned with candidates). Objective: gpu_weight * mean score + topology_weight * connectivity
// (connectivity only when the wish is not kNone). kNvlinkRequired admits only all-NVLink sets.
// Exhaustive for small searches, greedy growth from every seed beyond that.
std::optional<GpuSet> best_set(const model::Node& node, const std::vector<int>& candidates,
                               const std::vector<double>& scores, int k,
                               model::TopologyWish wish, const Profile& profile);

}  // namespace gapless::placement
