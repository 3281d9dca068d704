#include "gapless/server/pending_pods.h"

namespace gapless::server {

namespace {

// Per heap string or map node: its header and the allocator's bookkeeping, roughly.
constexpr std::size_t kNodeOverhead = 64;

std::size_t string_bytes(const std::string& s) {
  return kNodeOverhead + s.size();
}

}  // namespace

std::size_t PendingPods::estimated_bytes(const k8s::ParsedPod& pod) {
  const model::PodInfo& i = pod.info;
  std::size_t n = sizeof(Entry) + 2 * kNodeOverhead + 2 * string_bytes(i.uid);  // both indexes
  for (const std::string* s :
       {&i.ns, &i.name, &i.priority_class, &i.policy, &i.node, &pod.request.mig_profile}) {
    n += string_bytes(*s);
  }
  for (const auto& [k, v] : i.labels) n += kNodeOverhead + string_bytes(k) + string_bytes(v);
  for (const std::string& m : pod.request.models) n += string_bytes(m);
  for (const auto& c : pod.device_classes) n += kNodeOverhead + string_bytes(c.first) + 8;
  return n;
}

std::vector<PendingPods::Listed> PendingPods::list(std::size_t max) const {
  std::vector<Listed> out;
  std::lock_guard lock(mu_);
  const auto now = Clock::now();
  for (const auto& [order, uid] : by_age_) {
    if (out.size() >= max) break;
    const Entry& e = by_uid_.at(uid);
    if (now - e.seen > max_age_) continue;  // expired, not yet evicted
    out.push_back({e.pod, std::chrono::duration<double>(now - e.seen).count()});
  }
  return out;
}

void PendingPods::remember(const k8s::ParsedPod& pod) {
  if (pod.info.uid.empty()) return;
  const std::size_t bytes = estimated_bytes(pod);
  std::lock_guard lock(mu_);
  if (auto it = by_uid_.find(pod.info.uid); it != by_uid_.end()) erase_locked(it);
  const auto now = Clock::now();
  const std::uint64_t order = next_order_++;
  by_uid_.emplace(pod.info.uid, Entry{pod, now, order, bytes});
  by_age_.emplace(order, pod.info.uid);
  bytes_ += bytes;
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
  if (auto it = by_uid_.find(uid); it != by_uid_.end()) erase_locked(it);
}

std::size_t PendingPods::size() const {
  std::lock_guard lock(mu_);
  return by_uid_.size();
}

std::size_t PendingPods::bytes() const {
  std::lock_guard lock(mu_);
  return bytes_;
}

void PendingPods::erase_locked(std::map<std::string, Entry>::iterator it) {
  bytes_ -= it->second.bytes;
  by_age_.erase(it->second.order);
  by_uid_.erase(it);
}

// Drops the oldest entries while they are expired or the table is over its count or bytes.
// Entries are stamped in insertion order, so the oldest is always by_age_'s first.
void PendingPods::evict_locked(Clock::time_point now) {
  while (!by_age_.empty()) {
    auto it = by_uid_.find(by_age_.begin()->second);
    const bool expired = now - it->second.seen > max_age_;
    if (!expired && by_uid_.size() <= capacity_ && bytes_ <= max_bytes_) return;
    erase_locked(it);
  }
}

}  // namespace gapless::server
