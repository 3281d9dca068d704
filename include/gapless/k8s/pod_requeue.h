// Requeueing the pods kube-scheduler parked while this extender could not answer.
//
// kube-scheduler (v1.26 and later) puts a pod whose extender call failed (connection refused
// while the extender restarts, or an Error while its model is not ready) into its unschedulable
// queue with no plugin to wake it: only its 5-minute flush, or an update of the pod, moves it
// back (isPodUpdated compares the pod without status, so an annotation change counts). So
// when the extender becomes ready, it patches the annotation gapless.io/requeue on its
// scheduler's pods whose last attempt ended in that error (docs/high-availability.md):
//   - only pods of `scheduler_name`, not bound, not being deleted, whose PodScheduled condition
//     is False with reason SchedulerError (kube-scheduler's mark for a failed extender call;
//     Unschedulable pods have a plugin or event to wake them and are left alone);
//   - only while this replica's kube-scheduler holds the leader lease (only the leader's queue
//     parks pods; a standby's starts fresh when it takes over);
//   - for a window after each change to ready, each pod at most once per window, at most
//     `per_second` patches a second and `max_per_window` in all.
// Thread-safe: the pod informer feeds it while one thread calls step().
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "gapless/k8s/api_client.h"
#include "gapless/k8s/informer.h"
#include "gapless/k8s/scheduler_lease.h"

namespace gapless::k8s {

inline constexpr const char* kRequeueAnnotation = "gapless.io/requeue";

struct RequeueOptions {
  std::string scheduler_name = "gapless-scheduler";
  // kube-scheduler's leader lease (leaderElection in its configuration). Empty name: no leader
  // check, every replica nudges.
  std::string lease_namespace;
  std::string lease_name;
  // This replica's pod name: kube-scheduler's lease identity is "<host name>_<uuid>", and a
  // pod's host name is its name.
  std::string replica_name;
  std::chrono::milliseconds window{60000};
  double per_second = 10;
  std::size_t max_per_window = 500;
  std::chrono::milliseconds leader_recheck{5000};  // how long a lease answer is trusted
  std::size_t max_tracked = 10000;                 // errored pods remembered at most
};

// Whether kube-scheduler's last attempt at `pod` (a v1 Pod) ended in an error and the pod is
// one of `scheduler_name`'s, still waiting for a node.
bool parked_by_error(const nlohmann::json& pod, const std::string& scheduler_name);

// The lease check of `o` (its lease, replica and recheck); `if_unreadable`: the answer when the
// lease cannot be read (yes for the requeue, no for evictions).
LeaseOptions lease_options(const RequeueOptions& o, bool if_unreadable);

class PodRequeue {
 public:
  using Clock = std::chrono::steady_clock;
  using Log = std::function<void(const std::string&)>;

  PodRequeue(ApiTransport& api, RequeueOptions options, Log log = nullptr);

  // `inner` with this tracker fed from the same pod lists and events, after `inner`.
  InformerHandlers feed(InformerHandlers inner);
  void on_list(const std::vector<nlohmann::json>& pods);
  void on_event(const std::string& type, const nlohmann::json& pod);

  // One step, called periodically with the extender's readiness at `now`: opens a window when
  // readiness turns true and patches the pods due. Returns the patches sent.
  std::size_t step(bool ready, Clock::time_point now);

  std::vector<std::string> parked() const;  // "ns/name" of the pods tracked now
  std::size_t patched_total() const;        // patches the API server took
  std::size_t failed_total() const;         // patches it refused or that did not arrive

 private:
  struct PodRef {
    std::string ns;
    std::string name;
  };
  void track_locked(const nlohmann::json& pod);
  // Pods due in this window, at most `n`; REQUIRES: mu_ held.
  std::vector<std::pair<std::string, PodRef>> due_locked(std::size_t n) const;

  ApiTransport& api_;
  const RequeueOptions options_;
  const Log log_;
  mutable std::mutex mu_;
  std::map<std::string, PodRef> parked_;  // by UID
  // Window state: only step() touches it.
  bool was_ready_ = false;
  Clock::time_point window_end_{};
  std::set<std::string> nudged_;  // UIDs patched (or tried) in this window
  double tokens_ = 0;
  Clock::time_point refilled_{};
  // Whether this replica's kube-scheduler leads; an unreadable lease counts as yes (a needless
  // patch costs one retry of the pod, a missed one 5 minutes).
  SchedulerLease lease_;
  std::atomic<std::size_t> patched_{0};
  std::atomic<std::size_t> failed_{0};
};

}  // namespace gapless::k8s
