// The bind gate that lets the node's device plugin tell which pod an Allocate is for
// (docs/node-pairing.md).
//
// The kubelet's Allocate names devices, never the pod. The plugin finds the pod by what the
// container asks: the pending pod on its node whose next unserved container asks exactly this
// (resource, count). That is unambiguous as long as no two pods on one node that have not been
// allocated yet could both ask the same (resource, count) next. The gate keeps it so for the pods
// Gapless binds: per node, the "open" pods (bound, not yet confirmed allocated on the node) and
// their pairing classes; a bind whose classes meet an open pod's waits until that pod closes.
//
// Pairing class: one (resource, count) a container of the pod asks of a resource the Gapless
// device plugin serves (nvidia.com/gpu, gapless.io/gpu-shared-count, nvidia.com/mig-<profile>),
// count > 0, over init and app containers. Two pods CONFLICT when their class sets intersect.
//
// Why disjoint sets are enough (the soundness argument): the kubelet admits one pod at a time
// and allocates all its containers during that admission, init containers first. An Allocate
// for (r, c) is therefore for a container of the pod being admitted, which asks exactly (r, c),
// so (r, c) is in that pod's class set. Any other pod the plugin could take for it must also
// be pending, not fully served and have an unserved container asking (r, c): (r, c) is in its
// set too, so the two sets intersect. With at most one open pod per intersecting group on a
// node, the pod being admitted is the only open candidate. Pods whose sets are disjoint may be
// admitted in any order, interleaved with nothing: they never compete for an Allocate.
// (Pods of other schedulers are not gated; the plugin refuses when it still sees two
// candidates, it never guesses.)
//
// Pure bookkeeping: deterministic, no I/O, no clock (the caller passes a steady time in
// seconds). Not thread-safe: the caller serialises calls.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace gapless::placement {

// (resource, device count one container asks)
using DeviceClass = std::pair<std::string, std::int64_t>;
using DeviceClasses = std::set<DeviceClass>;

// Whether two class sets intersect.
bool classes_conflict(const DeviceClasses& a, const DeviceClasses& b);

// Why an open pod stopped holding its node's classes.
enum class CloseReason {
  kAllocated,   // the device plugin served its last container (gapless.io/allocated)
  kStarted,     // its phase left Pending: admission happened (or failed)
  kDeleted,     // deleted, or being deleted
  kBindFailed,  // its binding was never posted successfully
  kExpired,     // open longer than the timeout: never reached the kubelet's Allocate
};
const char* close_reason_name(CloseReason why);

class PairingGate {
 public:
  struct Decision {
    bool open = false;  // true: bind now (the pod is open); false: wait with `ticket`
    std::uint64_t ticket = 0;
    std::string blocker;  // the open pod ("ns/name") it waits for
    std::string blocker_uid;
  };
  // A waiting bind that may go ahead now; the gate opened its pod already.
  struct Released {
    std::uint64_t ticket = 0;
    std::string uid;
    double waiting_since = 0;
  };
  struct ExpiredPod {
    std::string uid, name, node;
    double open_since = 0;
  };
  struct Expiry {
    std::vector<ExpiredPod> expired;
    std::vector<Released> released;
  };

  // A bind of pod `uid` ("ns/name" in `name`) to `node`. Opens it unless its classes meet an
  // open pod's on that node, or an earlier waiting bind's (first come, first served); a pod
  // without classes opens nothing and always goes. A pod open already (a retried bind) goes.
  Decision try_open(const std::string& node, const std::string& uid, const std::string& name,
                    DeviceClasses classes, double now);
  // Opens a pod bound earlier (found on the watch, e.g. after a restart) without checking:
  // it is bound already, the gate can only account for it. Not if open or classes empty.
  void note_bound(const std::string& node, const std::string& uid, const std::string& name,
                  DeviceClasses classes, double now);
  // Closes pod `uid` (nothing when it is not open) and returns the waiting binds on its node
  // that may go now, in FIFO order; their pods are open from `now`.
  std::vector<Released> close(const std::string& uid, CloseReason why, double now);
  // Drops a waiting bind (it gave up: deadline, shutdown). Later waiters may go then.
  std::vector<Released> cancel(std::uint64_t ticket, double now);
  // Closes the pods open for longer than `timeout` seconds, and releases who waited for them.
  Expiry expire(double now, double timeout);

  bool is_open(const std::string& uid) const { return open_.contains(uid); }
  std::vector<std::string> open_uids() const;
  std::size_t open_count() const { return open_.size(); }
  std::size_t waiting_count() const;
  // The earliest open-since time, for the caller's expiry timer.
  std::optional<double> oldest_open() const;
  // The open pod that blocks a waiting ticket now ("ns/name"), empty if none / unknown ticket.
  std::string blocker_of(std::uint64_t ticket) const;

 private:
  struct OpenPod {
    std::string node, name;
    DeviceClasses classes;
    double since = 0;
  };
  struct Waiter {
    std::uint64_t ticket = 0;
    std::string uid, name;
    DeviceClasses classes;
    double since = 0;
  };
  // The open pod on `node` (other than `uid`) whose classes meet `classes`, if any.
  const std::pair<const std::string, OpenPod>* open_conflict(const std::string& node,
                                                             const std::string& uid,
                                                             const DeviceClasses& classes) const;
  // Waiters of `node` that no open pod and no earlier waiter blocks, opened, in FIFO order.
  std::vector<Released> release(const std::string& node, double now);

  std::map<std::string, OpenPod> open_;                // by pod uid
  std::map<std::string, std::deque<Waiter>> waiting_;  // by node, FIFO
  std::uint64_t next_ticket_ = 1;
};

}  // namespace gapless::placement
