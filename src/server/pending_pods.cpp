#include "gapless/server/pending_pods.h"

#include <algorithm>

namespace gapless::server {

void PendingPods::remember(const k8s::ParsedPod& pod) {
  if (pod.info.uid.empty()) return;
  std::lock_guard lock(mu_);
  const auto now = Clock::now();
  by_uid_.insert_or_assign(pod.info.uid, Entry{pod, now});
  evict_locked(now);
}

std::optional<k8s::ParsedPod> PendingPods::find(const std::string& uid) const {
  std::lock_guard lock(mu_);
  auto it = by_uid_.find(uid);
  if (it == by_uid_.end() || Clock::now() - it->second.seen > max_age_) return std::nullopt;
  return it->second.pod;
}

void PendingPods::forget(const std::string& uid) {
  std::lock_guard lock(mu_);
  by_uid_.erase(uid);
}

std::size_t PendingPods::size() const {
  std::lock_guard lock(mu_);
  return by_uid_.size();
}

// Drops expired entries, then the oldest ones while over capacity.
void PendingPods::evict_locked(Clock::time_point now) {
  std::erase_if(by_uid_, [&](const auto& kv) { return now - kv.second.seen > max_age_; });
  while (by_uid_.size() > capacity_) {
    auto oldest = std::min_element(by_uid_.begin(), by_uid_.end(), [](const auto& a, const auto& b) {
      return a.second.seen < b.second.seen;
    });
    by_uid_.erase(oldest);
  }
}

}  // namespace gapless::server
