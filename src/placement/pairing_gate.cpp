#include "gapless/placement/pairing_gate.h"

#include <algorithm>

namespace gapless::placement {

bool classes_conflict(const DeviceClasses& a, const DeviceClasses& b) {
  // Both sorted: one merge pass.
  auto i = a.begin();
  auto j = b.begin();
  while (i != a.end() && j != b.end()) {
    if (*i < *j) {
      ++i;
    } else if (*j < *i) {
      ++j;
    } else {
      return true;
    }
  }
  return false;
}

const char* close_reason_name(CloseReason why) {
  switch (why) {
    case CloseReason::kAllocated:
      return "allocated";
    case CloseReason::kStarted:
      return "started";
    case CloseReason::kDeleted:
      return "deleted";
    case CloseReason::kBindFailed:
      return "bind failed";
    case CloseReason::kExpired:
      return "expired";
  }
  return "unknown";
}

const std::pair<const std::string, PairingGate::OpenPod>* PairingGate::open_conflict(
    const std::string& node, const std::string& uid, const DeviceClasses& classes) const {
  for (const auto& entry : open_) {
    if (entry.first == uid || entry.second.node != node) continue;
    if (classes_conflict(entry.second.classes, classes)) return &entry;
  }
  return nullptr;
}

PairingGate::Decision PairingGate::try_open(const std::string& node, const std::string& uid,
                                            const std::string& name, DeviceClasses classes,
                                            double now) {
  Decision d;
  if (classes.empty() || open_.contains(uid)) {
    d.open = true;
    return d;
  }
  const auto* blocker = open_conflict(node, uid, classes);
  std::deque<Waiter>& queue = waiting_[node];
  const bool queued_behind = std::any_of(queue.begin(), queue.end(), [&](const Waiter& w) {
    return classes_conflict(w.classes, classes);
  });
  if (blocker == nullptr && !queued_behind) {
    open_[uid] = OpenPod{node, name, std::move(classes), now};
    if (queue.empty()) waiting_.erase(node);
    d.open = true;
    return d;
  }
  d.ticket = next_ticket_++;
  queue.push_back(Waiter{d.ticket, uid, name, std::move(classes), now});
  if (blocker == nullptr) {
    // Behind an earlier waiter: name what that one waits for.
    for (const Waiter& w : queue) {
      if (!classes_conflict(w.classes, queue.back().classes) || w.ticket == d.ticket) continue;
      blocker = open_conflict(node, w.uid, w.classes);
      if (blocker != nullptr) break;
    }
  }
  if (blocker != nullptr) {
    d.blocker = blocker->second.name;
    d.blocker_uid = blocker->first;
  }
  return d;
}

void PairingGate::note_bound(const std::string& node, const std::string& uid,
                             const std::string& name, DeviceClasses classes, double now) {
  if (classes.empty() || open_.contains(uid)) return;
  open_[uid] = OpenPod{node, name, std::move(classes), now};
}

std::vector<PairingGate::Released> PairingGate::release(const std::string& node, double now) {
  std::vector<Released> out;
  auto it = waiting_.find(node);
  if (it == waiting_.end()) return out;
  std::deque<Waiter>& queue = it->second;
  std::vector<const Waiter*> still_waiting;  // earlier waiters keep their turn
  std::deque<Waiter> kept;
  for (Waiter& w : queue) {
    const bool behind =
        std::any_of(still_waiting.begin(), still_waiting.end(),
                    [&](const Waiter* e) { return classes_conflict(e->classes, w.classes); });
    if (behind || open_conflict(node, w.uid, w.classes) != nullptr) {
      kept.push_back(std::move(w));
      still_waiting.push_back(&kept.back());
      continue;
    }
    out.push_back(Released{w.ticket, w.uid, w.since});
    if (!open_.contains(w.uid)) open_[w.uid] = OpenPod{node, w.name, std::move(w.classes), now};
  }
  if (kept.empty()) {
    waiting_.erase(it);
  } else {
    queue = std::move(kept);
  }
  return out;
}

std::vector<PairingGate::Released> PairingGate::close(const std::string& uid, CloseReason,
                                                      double now) {
  auto it = open_.find(uid);
  if (it == open_.end()) return {};
  const std::string node = it->second.node;
  open_.erase(it);
  return release(node, now);
}

std::vector<PairingGate::Released> PairingGate::cancel(std::uint64_t ticket, double now) {
  for (auto it = waiting_.begin(); it != waiting_.end(); ++it) {
    auto& queue = it->second;
    auto w = std::find_if(queue.begin(), queue.end(),
                          [&](const Waiter& x) { return x.ticket == ticket; });
    if (w == queue.end()) continue;
    queue.erase(w);
    const std::string node = it->first;
    return release(node, now);
  }
  return {};
}

PairingGate::Expiry PairingGate::expire(double now, double timeout) {
  Expiry out;
  std::set<std::string> nodes;
  for (auto it = open_.begin(); it != open_.end();) {
    if (now - it->second.since < timeout) {
      ++it;
      continue;
    }
    out.expired.push_back(
        ExpiredPod{it->first, it->second.name, it->second.node, it->second.since});
    nodes.insert(it->second.node);
    it = open_.erase(it);
  }
  for (const std::string& node : nodes) {
    auto released = release(node, now);
    out.released.insert(out.released.end(), released.begin(), released.end());
  }
  return out;
}

std::size_t PairingGate::waiting_count() const {
  std::size_t n = 0;
  for (const auto& [node, queue] : waiting_) n += queue.size();
  return n;
}

std::vector<std::string> PairingGate::open_uids() const {
  std::vector<std::string> out;
  for (const auto& [uid, pod] : open_) out.push_back(uid);
  return out;
}

std::optional<double> PairingGate::oldest_open() const {
  std::optional<double> out;
  for (const auto& [uid, pod] : open_) {
    if (!out || pod.since < *out) out = pod.since;
  }
  return out;
}

std::string PairingGate::blocker_of(std::uint64_t ticket) const {
  for (const auto& [node, queue] : waiting_) {
    for (const Waiter& w : queue) {
      if (w.ticket != ticket) continue;
      const auto* b = open_conflict(node, w.uid, w.classes);
      return b == nullptr ? std::string() : b->second.name;
    }
  }
  return {};
}

}  // namespace gapless::placement
