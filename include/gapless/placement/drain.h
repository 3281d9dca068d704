// Drain reservation: what Slurm's backfill and Volcano's reservation do against starving large
// jobs. A large pod that fits no node waits while smaller pods keep taking whatever frees up, so
// no node ever empties for it. The oldest such pod holds one node, the *drain target*: one that
// could take it once emptied and that is closest to taking it now. Other pods (of no higher
// priority) do not get the target, so it drains and the waiting pod starts there.
//
// The target is withheld even when it is the only node that fits another pod: with a softer
// rule (withheld only while another node fits) the many small pods waiting beside the large one
// took every GPU the target freed, and the large pod waited as long as without a reservation
// (bench/README.md, dynamic mode). The cost is bounded: one node's free GPUs, until the pod
// starts or stops waiting.
//
// Pure data and functions of the model (no I/O, no locks); placement::Scheduler keeps one
// DrainQueue under its lock and runs it as the (waiting) stage.
#pragma once

#include <compare>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "gapless/model/cluster.h"
#include "gapless/model/node.h"
#include "gapless/model/request.h"
#include "gapless/placement/engine.h"

namespace gapless::placement {

// How far a node is from taking a pod now: what must leave first. Ordered: GPUs first, then
// CPU, then memory, then the node's tie_break_rank, so the choice is deterministic.
struct DrainDistance {
  int gpus = 0;                 // GPUs the pod needs beyond the idle ones that could serve it
  std::int64_t cpu_milli = 0;   // CPU the pod asks beyond what is free (tracked nodes only)
  std::int64_t memory_mib = 0;  // likewise memory
  std::uint64_t rank = 0;       // tie_break_rank of the node's name
  auto operator<=>(const DrainDistance&) const = default;
};

// Nullopt when the node could not take the pod even empty (too few GPUs of its models, no
// NVLink set of that size, too little CPU or memory where `check_host`) or is fenced; else what
// stands between the pod and the node. Whole-GPU requests only (the only kind that reserves).
std::optional<DrainDistance> drain_distance(const model::Node& node, const model::GpuRequest& req,
                                            bool check_host);

// The node with the least distance, or null when none could ever take the pod.
const model::Node* pick_drain_target(const std::vector<const model::Node*>& nodes,
                                     const model::GpuRequest& req, bool check_host);

struct DrainReservation {
  std::string pod_uid;
  std::int32_t priority = 0;  // the pod's: pods of higher priority are not held back
  std::string node;
};

// A node consolidation freed for one waiting pod (docs/consolidation.md "Guarantees"): withheld
// like the drain target from other pods of no higher priority, so that the evicted pods'
// replacements (or anyone else) do not take the room back before the pod is retried. It lasts
// while the pods evicted for it still hold GPUs in the model (they are terminating) and
// `hold_s` after the last one left, on the driver's clock, and ends sooner when the pod gets an
// allocation or is deleted.
struct RoomHold {
  DrainReservation room;             // the waiting pod and the freed node
  std::vector<std::string> evicted;  // UIDs evicted for it that the model still holds
  double hold_s = 0;                 // how long after they left
  double until_s = 0;                // the driver's clock: in force before this
};

// The pods waiting for a drain target, oldest first, and the target of the oldest one some
// node could take. Bounded in entries and bytes (a pod's UID and model list are the client's);
// entries carry the driver's clock (seconds, any origin) of their last failed filter, so a
// driver that cannot see every pod leave (the extender) expires them.
//
// A pod holds a target only once it has been found waiting twice: a pod that really waits is
// retried (kube-scheduler requeues it on the next pod deletion or node change; the bench after
// every departure), while one that fails once and goes (the static replays drop it) never
// takes a node from the others.
class DrainQueue {
 public:
  static constexpr std::size_t kMaxPods = 4096;
  static constexpr std::size_t kMaxBytes = 4 * 1024 * 1024;

  enum class Waited {
    kNo,         // not recorded: the table is full, or the pod is too small to reserve
    kRecorded,   // recorded, or its clock refreshed
    kConfirmed,  // found waiting for the second time: it may hold a target from now on
  };
  // Records the pod as waiting, or refreshes its clock. Pods asking fewer than `min_gpus`
  // whole GPUs (0: every pod) are not recorded. A `watched` pod (its wait was seen on the pod
  // itself, not inferred from a failed filter) is confirmed at once and never expires: only
  // erase() ends its wait. Does not pick: call pick() after.
  Waited wait(const model::PodInfo& pod, const model::GpuRequest& req, int min_gpus, double now_s,
              bool watched = false);
  bool contains(const std::string& uid) const;
  // Forgets the pod; whether it was waiting.
  bool erase(const std::string& uid);
  // Forgets pods last seen before `cutoff_s`, watched ones excepted; how many.
  std::size_t expire(double cutoff_s);
  bool any_before(double cutoff_s) const;
  // Chooses the target again over `nodes` (the model's, in name order): the closest host of
  // the oldest waiting pod that has one (the first few pods only: each is a pass over nodes).
  void pick(const std::vector<const model::Node*>& nodes, bool check_host);

  // The same after only `touched` changed, cheaper: the target moves to a touched node now
  // closer. False, changing nothing, when a full pick() is needed (none is held, or the
  // target itself changed).
  bool pick_among(const std::vector<const model::Node*>& touched, bool check_host);

  // Holds `h.room.node` for `h.room.pod_uid`, replacing a hold it had (a new plan for it).
  // Does not pick: call pick() after (a pod holding a room has it as its drain target).
  void hold(RoomHold h);
  // Ends the pod's hold; whether it had one.
  bool release(const std::string& pod_uid);
  // Forgets evicted pods `cluster` no longer holds, keeps holds with some still there in force
  // until now_s + hold_s, and ends those whose time is over; how many ended.
  std::size_t expire_holds(const model::Cluster& cluster, double now_s);
  const std::vector<RoomHold>& holds() const { return holds_; }

  // The nodes `pod` must not get (the drain target, rooms held for others), each once.
  std::vector<std::string> withheld_from(const model::PodInfo& pod) const;
  // Moves the nodes withheld from `pod` from r's passed nodes to its rejected ones (an
  // unresolvable reason: preemption must not empty them for another pod). `passed_nodes`, when
  // aligned with r->passed, stays aligned.
  void withhold(const model::PodInfo& pod, FilterResult* r,
                std::vector<const model::Node*>* passed_nodes) const;
  // Score's form of the same: the withheld nodes' scores set to -1.
  void withhold(const model::PodInfo& pod, const std::vector<std::string>& nodes,
                std::vector<double>* raw) const;

  const std::optional<DrainReservation>& reservation() const { return held_; }
  bool empty() const { return pods_.empty(); }
  std::size_t size() const { return pods_.size(); }
  std::size_t bytes() const { return bytes_; }

 private:
  struct Entry {
    std::string uid;
    std::int32_t priority = 0;
    model::GpuRequest req;
    double seen_s = 0;
    std::size_t bytes = 0;
    int times = 1;         // how often found waiting
    bool watched = false;  // seen waiting on the pod itself: ends only by erase()
  };
  // Whether pods_[i] may hold a target.
  bool confirmed(std::size_t i) const { return pods_[i].times >= 2; }
  std::deque<Entry>::iterator find(const std::string& uid);
  const RoomHold* hold_of(const std::string& uid) const;
  std::deque<Entry> pods_;
  std::vector<RoomHold> holds_;  // by the order they were made; a few at most
  std::size_t bytes_ = 0;
  std::optional<DrainReservation> held_;
  DrainDistance held_distance_;  // the target's, when it was chosen
  std::size_t held_index_ = 0;   // the holder's place in pods_ when it was chosen
};

}  // namespace gapless::placement
