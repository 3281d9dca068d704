// Consolidation on a cluster (docs/consolidation.md "On Kubernetes"): for a pending GPU pod of
// Gapless's scheduler that kube-scheduler found no node for, the engine's plan
// (placement::Scheduler::consolidate) carried out through the Eviction API, so that
// PodDisruptionBudgets hold.
//
// Rules, each checked in step():
//   - only while the policy enables consolidation and this replica's kube-scheduler leads
//     (`leads`: k8s::SchedulerLease, an unreadable lease counting as no);
//   - only for a pod reported waiting (ClusterSync's `unschedulable` hook, ended by
//     `stop_waiting`) for which the engine finds no node that fits it as it is;
//   - never again for a pod while pods evicted for it still hold GPUs in the model (they are
//     terminating; once gone, the pod is planned for again if it still waits);
//   - movable pods only (k8s::pod_movability and the policy's rules), never one whose eviction a
//     PodDisruptionBudget refused within `blocked_for`, nor one a budget in the PDB informer
//     allows no disruption now;
//   - every eviction first as a dry run (?dryRun=All): a 429 (a budget) drops that pod from the
//     candidates and another plan is sought at once (at most `max_replans` times), so a plan is
//     not half carried out because of a budget it could have seen; a 429 on the real eviction
//     (a race) ends the plan there, the pods already evicted are counted, and the pod waits for
//     them before a new plan;
//   - at most `per_second` eviction calls a second (dry runs count) and `max_moves_per_window`
//     evictions in any `window`, on top of the policy's rateLimit (the engine's MoveLedger,
//     told through Scheduler::moves_made); a plan that does not fit in what is left waits;
//   - policy dryRun: the plan is posted as an Event on the pod, nothing is evicted;
//   - after evicting, the plan's node is held for the pod in the engine (Scheduler::hold_room:
//     other pods' filter and score avoid it while the evicted pods terminate and the policy's
//     holdSeconds after), so the replacements do not take the room back; every step runs the
//     holds' clock (Scheduler::expire_holds).
// Events: on each evicted pod (Normal ConsolidationEviction, naming the pod it makes room for);
// on the waiting pod (Normal ConsolidationPlan: what was evicted and why that plan; Warning
// ConsolidationBlocked: which eviction a budget refused and what happens next; Normal
// ConsolidationNoPlan: why there is no plan; Normal ConsolidationDryRun). An Event repeating the
// pod's previous one is not posted again. After a pod was planned for (carried out or not), it is
// not planned for again within `backoff`.
//
// Thread-safety: waiting/stopped may be called from informer threads while one thread calls
// step().
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "gapless/k8s/api_client.h"
#include "gapless/k8s/pod_request.h"
#include "gapless/model/disruption_budget.h"
#include "gapless/placement/scheduler.h"

namespace gapless::server {

struct ConsolidatorOptions {
  std::string component = "gapless-extender";  // the Events' source
  std::chrono::milliseconds backoff{30000};
  std::chrono::milliseconds blocked_for{300000};
  std::chrono::milliseconds window{600000};
  std::size_t max_moves_per_window = 30;
  double per_second = 5;
  int max_replans = 3;
  std::size_t max_tracked = 1000;  // waiting pods remembered at most
};

class Consolidator {
 public:
  using Clock = std::chrono::steady_clock;
  using Log = std::function<void(const std::string&)>;
  using Leads = std::function<bool(Clock::time_point)>;
  using Budgets = std::function<std::vector<model::DisruptionBudget>()>;

  // `scheduler` and `api` must outlive this. `budgets`: the PodDisruptionBudgets in force (may
  // be null: only the Eviction API's answers count).
  Consolidator(placement::Scheduler& scheduler, k8s::ApiTransport& api, Leads leads,
               Budgets budgets, ConsolidatorOptions options, Log log = nullptr);

  void waiting(const k8s::ParsedPod& pod);  // ClusterSyncHooks::unschedulable
  void stopped(const std::string& uid);     // ClusterSyncHooks::stop_waiting

  // One step at `now`, with the extender's readiness: plans and evicts for at most one pod.
  // Returns the evictions made.
  std::size_t step(bool ready, Clock::time_point now);

  std::size_t evicted_total() const;
  std::size_t blocked_total() const;         // evictions (dry runs included) a budget refused
  std::vector<std::string> tracked() const;  // "ns/name" of the pods waiting now, sorted

 private:
  struct Waiter {
    k8s::ParsedPod pod;
    std::uint64_t seq = 0;          // first seen: the oldest is planned for first
    Clock::time_point next_try{};   // backoff
    std::set<std::string> evicted;  // UIDs evicted for it, until they leave the model
    std::string last_event;         // the reason and message last posted on it
  };
  enum class Outcome { kNothing, kEvicted, kWaitForTokens };

  // Plans for `w` and carries the plan out; *made: evictions made.
  Outcome consolidate_for(Waiter& w, const placement::ConsolidationRules& rules,
                          Clock::time_point now, std::size_t* made);
  // Dry-runs every eviction of the plan: the move a budget refused, or null (and *failed set
  // when the API server could not say).
  const placement::PlannedMove* dry_run(const placement::ConsolidationPlan& plan, bool* failed);
  // Evicts the plan's pods in order, stopping at the first refusal: the moves made.
  std::vector<placement::PlannedMove> evict(const placement::ConsolidationPlan& plan,
                                            const Waiter& w, Clock::time_point now);
  // Whether pods evicted for `w` still hold GPUs in the model; forgets those that left.
  bool still_terminating(Waiter& w) const;
  // UIDs not to move now: refused by a budget within blocked_for, or covered by a budget
  // that allows no disruption.
  std::set<std::string> excluded(Clock::time_point now);
  // How many of `uids` hold GPUs in the model.
  std::size_t holding_gpus(const std::set<std::string>& uids) const;
  void tell_waiting(Waiter& w, const std::string& type, const std::string& reason,
                    const std::string& message);
  void refill(Clock::time_point now);
  // The engine's clock for `now` (plans, the rate limits it keeps, held rooms): Unix seconds,
  // so that pods' status.startTime gives their GPU-time lost; steady, as `now` is, from the
  // offset taken at construction.
  double engine_s(Clock::time_point now) const;
  std::size_t moves_in_window(Clock::time_point now);

  placement::Scheduler& scheduler_;
  k8s::ApiTransport& api_;
  const Leads leads_;
  const Budgets budgets_;
  const ConsolidatorOptions options_;
  const Log log_;
  const double unix_offset_s_;  // Unix time minus the steady clock, at construction

  mutable std::mutex mu_;                  // waiting_ and next_seq_ (the informers add and remove)
  std::map<std::string, Waiter> waiting_;  // by UID
  std::uint64_t next_seq_ = 0;

  // Only step() touches the rest.
  std::map<std::string, Clock::time_point> blocked_;  // UID -> refused until
  std::deque<Clock::time_point> moves_;               // evictions made, oldest first
  double tokens_ = 0;
  Clock::time_point refilled_{};
  bool started_ = false;
  std::atomic<std::size_t> evicted_{0};
  std::atomic<std::size_t> blocked_count_{0};
};

}  // namespace gapless::server
