// The learned workload mix as a stage of the runner (placement/stage.h): the pods the runner is
// asked about, counted once per UID, teach it the mix of request shapes the `gapless` and `fgd`
// strategies score against (placement::WorkloadLearner), or a fixed mix stands in (the FGD
// paper's oracle, the trace bench). It also tallies the request shapes asked most, which the
// runner's warm-up prepares.
//
//   PodForgotten   a deleted pod's UID is forgotten (what it added to the mix stays)
//
// Thread-safety: as Stage; seen() and the const calls under the runner's read lock, observe()
// under its write lock.
#pragma once

#include <cstddef>
#include <deque>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "gapless/placement/stage.h"
#include "gapless/placement/workload.h"

namespace gapless::placement {

class LearnedMixStage final : public Stage {
 public:
  // `fixed`: score against this mix instead of learning one; must outlive the stage.
  explicit LearnedMixStage(const WorkloadMix* fixed) : fixed_(fixed) {}

  std::string_view name() const override { return "learned_mix"; }
  void pod_forgotten(const model::Cluster& cluster, const std::string& pod_uid) override;

  // Whether the pod's UID was counted already.
  bool seen(const std::string& pod_uid) const { return seen_.count(pod_uid) != 0; }
  enum class Observed { kAlreadySeen, kCounted, kMixChanged };
  // Counts the pod, the first time its UID is seen. REQUIRES: the pod has a UID.
  Observed observe(const model::PodInfo& pod, const model::GpuRequest& req);
  // The mix scoring uses: the fixed one, or the one learned so far. Its address never changes.
  const WorkloadMix& mix() const { return fixed_ != nullptr ? *fixed_ : learner_.mix(); }
  std::size_t observed() const { return learner_.observed(); }
  // The `n` shapes asked most (ties: first asked first) with the profile their first pod
  // selects in `policy`; shapes whose pod selects none, and pods without GPUs, left out.
  std::vector<std::pair<model::GpuRequest, const Profile*>> most_asked(const Policy& policy,
                                                                       std::size_t n) const;

 private:
  const WorkloadMix* fixed_;
  WorkloadLearner learner_;
  // UIDs already counted, oldest first, bounded (pods filtered and never bound fall out).
  std::unordered_set<std::string> seen_;
  std::deque<std::string> seen_order_;
  // Request shapes counted, with the first pod of each (its profile selection). Bounded: shapes
  // beyond a limit are not tallied.
  struct AskedShape {
    model::GpuRequest req;
    model::PodInfo pod;
    std::size_t count = 0;
  };
  std::vector<AskedShape> asked_;
  std::unordered_map<model::GpuRequest, std::size_t, model::GpuRequestHash> asked_index_;
};

}  // namespace gapless::placement
