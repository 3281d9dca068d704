#include "gapless/placement/learned_mix_stage.h"

#include <algorithm>

namespace gapless::placement {

namespace {

// Pods counted by UID before the oldest is forgotten (pods filtered and never bound stay in the
// table otherwise; real pods are forgotten when they are deleted).
constexpr std::size_t kMaxSeenPods = 200000;

// Distinct request shapes tallied for warm-up; a cluster with more keeps the first ones seen.
constexpr std::size_t kMaxAskedShapes = 1024;

}  // namespace

void LearnedMixStage::pod_forgotten(const model::Cluster& /*cluster*/, const std::string& pod_uid) {
  // The UID stays in seen_order_ until it reaches the front (erasing it there is a scan of up to
  // kMaxSeenPods entries per deleted pod); the bound counts it until then.
  seen_.erase(pod_uid);
}

LearnedMixStage::Observed LearnedMixStage::observe(const model::PodInfo& pod,
                                                   const model::GpuRequest& req) {
  if (!seen_.insert(pod.uid).second) return Observed::kAlreadySeen;
  seen_order_.push_back(pod.uid);
  if (seen_order_.size() > kMaxSeenPods) {
    seen_.erase(seen_order_.front());
    seen_order_.pop_front();
  }
  if (auto [it, added] = asked_index_.try_emplace(req, asked_.size()); !added) {
    ++asked_[it->second].count;
  } else if (asked_.size() < kMaxAskedShapes) {
    asked_.push_back({req, pod, 1});
  } else {
    asked_index_.erase(it);
  }
  if (fixed_ == nullptr && learner_.observe(shape_of(req, /*with_memory=*/true))) {
    return Observed::kMixChanged;
  }
  return Observed::kCounted;
}

std::vector<std::pair<model::GpuRequest, const Profile*>> LearnedMixStage::most_asked(
    const Policy& policy, std::size_t n) const {
  std::vector<const AskedShape*> order;
  order.reserve(asked_.size());
  for (const AskedShape& a : asked_) order.push_back(&a);
  // asked_ is in first-asked order, so a stable sort by count keeps that order on ties.
  std::stable_sort(order.begin(), order.end(),
                   [](const AskedShape* a, const AskedShape* b) { return a->count > b->count; });
  std::vector<std::pair<model::GpuRequest, const Profile*>> out;
  for (const AskedShape* a : order) {
    if (out.size() == n) break;
    // Pods without GPUs never reach the extender (kube-scheduler's IsInterested): nobody asks.
    if (a->req.kind == model::RequestKind::kNone) continue;
    if (const Profile* p = select_profile(policy, a->pod, nullptr)) out.emplace_back(a->req, p);
  }
  return out;
}

}  // namespace gapless::placement
