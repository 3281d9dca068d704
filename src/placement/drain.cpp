#include "gapless/placement/drain.h"

#include <algorithm>
#include <bit>

#include "gapless/placement/demand.h"
#include "node_search.h"

namespace gapless::placement {
namespace {

// What the pod asks beyond what is free of one host resource; nullopt when it asks more than
// the node has at all. Untracked (capacity 0) or unasked: nothing.
std::optional<std::int64_t> host_short(std::int64_t cap, std::int64_t used, std::int64_t ask) {
  if (cap <= 0 || ask <= 0) return 0;
  if (ask > cap) return std::nullopt;
  return std::max<std::int64_t>(0, used + ask - cap);
}

// Waiting pods pick() tries, oldest first: a pod no node could take even empty would otherwise
// cost a pass over the nodes per model change.
constexpr std::size_t kPickTries = 4;

// Per entry: the deque slot and the heap strings, roughly (as server::PendingPods counts).
constexpr std::size_t kOverhead = 64;

std::size_t entry_bytes(const std::string& uid, const model::GpuRequest& req) {
  std::size_t n = 2 * kOverhead + uid.size();
  for (const std::string& m : req.models) n += kOverhead + m.size();
  return n;
}

}  // namespace

std::optional<DrainDistance> drain_distance(const model::Node& node, const model::GpuRequest& req,
                                            bool check_host) {
  if (req.kind != model::RequestKind::kWhole || node.fenced()) return std::nullopt;
  std::uint64_t able = 0;
  int idle = 0;
  for (const model::Gpu& g : node.gpus) {
    if (!can_serve(g, req)) continue;
    able |= std::uint64_t{1} << g.index;
    idle += can_serve_now(g, req) ? 1 : 0;
  }
  const int k = req.units();
  if (std::popcount(able) < k) return std::nullopt;
  if (req.topology == model::TopologyWish::kNvlinkRequired && k >= 2 &&
      !nvlink_clique_exists(node.links, able, k)) {
    return std::nullopt;
  }
  DrainDistance d;
  d.gpus = std::max(0, k - idle);
  if (check_host) {
    const auto cpu = host_short(node.host.cpu_milli, node.host_used.cpu_milli, req.host.cpu_milli);
    const auto mem =
        host_short(node.host.memory_mib, node.host_used.memory_mib, req.host.memory_mib);
    if (!cpu || !mem) return std::nullopt;
    d.cpu_milli = *cpu;
    d.memory_mib = *mem;
  }
  d.rank = tie_break_rank(node.name);
  return d;
}

const model::Node* pick_drain_target(const std::vector<const model::Node*>& nodes,
                                     const model::GpuRequest& req, bool check_host) {
  const model::Node* best = nullptr;
  DrainDistance best_d;
  for (const model::Node* n : nodes) {
    const auto d = drain_distance(*n, req, check_host);
    if (d && (best == nullptr || *d < best_d)) {
      best = n;
      best_d = *d;
    }
  }
  return best;
}

std::deque<DrainQueue::Entry>::iterator DrainQueue::find(const std::string& uid) {
  return std::find_if(pods_.begin(), pods_.end(), [&](const Entry& e) { return e.uid == uid; });
}

DrainQueue::Waited DrainQueue::wait(const model::PodInfo& pod, const model::GpuRequest& req,
                                    int min_gpus, double now_s, bool watched) {
  if (pod.uid.empty() || req.kind != model::RequestKind::kWhole || req.whole < min_gpus) {
    return Waited::kNo;
  }
  if (auto it = find(pod.uid); it != pods_.end()) {
    it->seen_s = now_s;  // keeps its place: the oldest waiter holds the target
    const bool was_confirmed = it->times >= 2;
    it->times = watched ? std::max(it->times + 1, 2) : it->times + 1;
    it->watched = it->watched || watched;
    return !was_confirmed && it->times >= 2 ? Waited::kConfirmed : Waited::kRecorded;
  }
  const std::size_t bytes = entry_bytes(pod.uid, req);
  if (pods_.size() >= kMaxPods || bytes_ + bytes > kMaxBytes) return Waited::kNo;
  pods_.push_back({pod.uid, pod.priority, req, now_s, bytes, watched ? 2 : 1, watched});
  bytes_ += bytes;
  return watched ? Waited::kConfirmed : Waited::kRecorded;
}

bool DrainQueue::contains(const std::string& uid) const {
  return std::any_of(pods_.begin(), pods_.end(), [&](const Entry& e) { return e.uid == uid; });
}

bool DrainQueue::erase(const std::string& uid) {
  auto it = find(uid);
  if (it == pods_.end()) return false;
  bytes_ -= it->bytes;
  pods_.erase(it);
  if (held_ && held_->pod_uid == uid) held_.reset();
  return true;
}

bool DrainQueue::any_before(double cutoff_s) const {
  return std::any_of(pods_.begin(), pods_.end(),
                     [&](const Entry& e) { return !e.watched && e.seen_s < cutoff_s; });
}

std::size_t DrainQueue::expire(double cutoff_s) {
  std::size_t gone = 0;
  for (auto it = pods_.begin(); it != pods_.end();) {
    if (it->watched || it->seen_s >= cutoff_s) {
      ++it;
      continue;
    }
    if (held_ && held_->pod_uid == it->uid) held_.reset();
    bytes_ -= it->bytes;
    it = pods_.erase(it);
    ++gone;
  }
  return gone;
}

void DrainQueue::pick(const std::vector<const model::Node*>& nodes, bool check_host) {
  held_.reset();
  std::size_t tries = 0;
  for (std::size_t i = 0; i < pods_.size() && tries < kPickTries; ++i) {
    if (!confirmed(i)) continue;
    // A pod consolidation made room for has that room as its target: it never holds two nodes.
    if (const RoomHold* h = hold_of(pods_[i].uid)) {
      held_ = h->room;
      held_distance_ = {};
      held_index_ = i;
      return;
    }
    ++tries;
    if (const model::Node* n = pick_drain_target(nodes, pods_[i].req, check_host)) {
      held_ = DrainReservation{pods_[i].uid, pods_[i].priority, n->name};
      held_distance_ = *drain_distance(*n, pods_[i].req, check_host);
      held_index_ = i;
      return;
    }
  }
}

bool DrainQueue::pick_among(const std::vector<const model::Node*>& touched, bool check_host) {
  // Only when the oldest confirmed pod holds the target: an older one without a host may have
  // gained one.
  if (!held_ || held_index_ >= pods_.size() || pods_[held_index_].uid != held_->pod_uid) {
    return false;
  }
  for (std::size_t i = 0; i < held_index_; ++i) {
    if (confirmed(i)) return false;
  }
  if (hold_of(held_->pod_uid) != nullptr) return true;  // the held room does not move
  const model::GpuRequest& req = pods_[held_index_].req;
  for (const model::Node* n : touched) {
    if (n->name == held_->node) return false;
  }
  for (const model::Node* n : touched) {
    const auto d = drain_distance(*n, req, check_host);
    if (d && *d < held_distance_) {
      held_->node = n->name;
      held_distance_ = *d;
    }
  }
  return true;
}

const RoomHold* DrainQueue::hold_of(const std::string& uid) const {
  const auto it = std::find_if(holds_.begin(), holds_.end(),
                               [&](const RoomHold& h) { return h.room.pod_uid == uid; });
  return it == holds_.end() ? nullptr : &*it;
}

void DrainQueue::hold(RoomHold h) {
  release(h.room.pod_uid);
  std::sort(h.evicted.begin(), h.evicted.end());
  holds_.push_back(std::move(h));
}

bool DrainQueue::release(const std::string& pod_uid) {
  return std::erase_if(holds_, [&](const RoomHold& h) { return h.room.pod_uid == pod_uid; }) > 0;
}

std::size_t DrainQueue::expire_holds(const model::Cluster& cluster, double now_s) {
  for (RoomHold& h : holds_) {
    std::erase_if(h.evicted, [&](const std::string& uid) { return !cluster.allocation(uid); });
    if (!h.evicted.empty()) h.until_s = std::max(h.until_s, now_s + h.hold_s);
  }
  return std::erase_if(holds_, [&](const RoomHold& h) { return h.until_s <= now_s; });
}

std::vector<std::string> DrainQueue::withheld_from(const model::PodInfo& pod) const {
  std::vector<std::string> out;
  const auto add = [&](const DrainReservation& r) {
    if (pod.uid == r.pod_uid || pod.priority > r.priority) return;
    if (std::find(out.begin(), out.end(), r.node) == out.end()) out.push_back(r.node);
  };
  if (held_) add(*held_);
  for (const RoomHold& h : holds_) add(h.room);
  return out;
}

void DrainQueue::withhold(const model::PodInfo& pod, FilterResult* r,
                          std::vector<const model::Node*>* passed_nodes) const {
  if (!held_ && holds_.empty()) return;  // the common case: nothing to allocate
  for (const std::string& target : withheld_from(pod)) {
    const auto it = std::find(r->passed.begin(), r->passed.end(), target);
    if (it == r->passed.end()) continue;
    const auto i = static_cast<std::size_t>(it - r->passed.begin());
    const bool room = std::any_of(holds_.begin(), holds_.end(),
                                  [&](const RoomHold& h) { return h.room.node == target; });
    r->rejected.push_back({std::move(*it), r->reasons.size()});
    r->reasons.push_back(
        {room ? "gapless: node is kept for a waiting pod that consolidation made room for"
              : "gapless: node is kept to drain for a waiting pod that needs it whole",
         "draining", true});
    r->passed.erase(it);
    if (passed_nodes != nullptr && passed_nodes->size() > i) {
      passed_nodes->erase(passed_nodes->begin() + static_cast<std::ptrdiff_t>(i));
    }
  }
}

void DrainQueue::withhold(const model::PodInfo& pod, const std::vector<std::string>& nodes,
                          std::vector<double>* raw) const {
  if (!held_ && holds_.empty()) return;
  const std::vector<std::string> targets = withheld_from(pod);
  for (std::size_t i = 0; i < nodes.size() && i < raw->size(); ++i) {
    if (std::find(targets.begin(), targets.end(), nodes[i]) != targets.end()) (*raw)[i] = -1;
  }
}

}  // namespace gapless::placement
