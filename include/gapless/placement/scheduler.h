// The scheduling runner, for every driver (the extender, the trace bench, the latency bench),
// after kube-scheduler's framework: it owns the cluster model, the policy and the lock, and runs
// the stages of stage_registry.cpp at the extension points of stage.h. Its own work: PreFilter's
// profile (select_profile), the engine's fit between Filter's stages, Score, NormalizeScore
// (normalize: 0..10, best alone at 10), the pick and commit of Reserve, and keeping the fragment
// cache, the per-policy verdict cache and the live summary current with the model. Stages: the
// quotas, the waiting pods' drain target, filter.keepBest, preemption (PostFilter), consolidation
// (Consolidate: moves of movable pods that make room for a pod no node fits), the learned
// workload mix. Also explain (every point's answer per node, read-only) and warm (the verdict
// cache, off the pods' path). Drivers never fill a ScoreContext: a policy naming a strategy is
// enough for the strategy to get what it needs. docs/architecture.md tells how to add a stage.
//
// Thread-safety: every method may be called concurrently. Filter, Score, PostFilter and explain
// share a read lock; observe (when it counts a new pod), reserve, unreserve, release, mutate and
// the waiting calls (wait for pods large enough to reserve, stop_waiting, forget, expire_waiting
// when something expired) take the write lock. Callbacks given to read() and mutate() run under
// that lock and must not call back.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <vector>

#include "gapless/model/result.h"
#include "gapless/placement/cluster_summary.h"
#include "gapless/placement/explanation.h"
#include "gapless/placement/fragmentation.h"
#include "gapless/placement/scheduler_options.h"
#include "gapless/placement/stage_registry.h"

namespace gapless::placement {

class Scheduler {
 public:
  Scheduler(model::Cluster cluster, Policy policy, SchedulerOptions options = {});
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // --- policy -----------------------------------------------------------------------------
  // The policy calls should use from start to end (a reload does not pull it away from them).
  std::shared_ptr<const LoadedPolicy> policy() const;
  // Replaces the policy for calls that start after this returns.
  void set_policy(Policy policy);
  // PreFilter: the profile for a pod, from `loaded` (see placement::select_profile). Null, with
  // *error set, when the pod's gapless.io/policy names a profile the policy lacks.
  static const Profile* select_profile(const LoadedPolicy& loaded, const model::PodInfo& pod,
                                       std::string* error) {
    return placement::select_profile(loaded.policy, pod, error);
  }

  // Counts the pod in the learned workload mix, the first time its UID is seen (later calls for
  // the same UID do nothing, so an informer event and a filter call never count a pod twice).
  // Pods without a UID are not counted. Returns true when the pod was new.
  bool observe(const model::PodInfo& pod, const model::GpuRequest& req);
  // Forgets a pod's UID (it was deleted), keeping what it added to the mix; it waits no more.
  void forget(const std::string& pod_uid);

  // --- the extension points -----------------------------------------------------------------
  // The engine's fit check between the stages' PreFilter and Filter (quota_stage.h: a pod over
  // its namespace's quota is unresolvable everywhere; waiting_stage.h: the drain target).
  FilterResult filter(const LoadedPolicy& loaded, const model::PodInfo& pod,
                      const model::GpuRequest& req, const std::vector<std::string>& nodes) const;
  // The above, then the Narrow stages over the passed nodes' scores (keep_best_stage.h).
  FilterResult filter(const LoadedPolicy& loaded, const model::PodInfo& pod,
                      const model::GpuRequest& req, const Profile& profile,
                      const std::vector<std::string>& nodes, std::uint64_t draw = 0) const;
  // `draw` feeds strategies that use one (random); give a new value per pod.
  std::vector<double> score(const LoadedPolicy& loaded, const model::GpuRequest& req,
                            const Profile& profile, const std::vector<std::string>& nodes,
                            std::uint64_t draw = 0) const;
  // Score for one pod: the above, then the PostScore stages (the drain target at -1 unless the
  // pod may have it: for drivers that pick the best score themselves, like the trace bench).
  std::vector<double> score(const LoadedPolicy& loaded, const model::PodInfo& pod,
                            const model::GpuRequest& req, const Profile& profile,
                            const std::vector<std::string>& nodes, std::uint64_t draw = 0) const;
  // normalize_scores with each node's tie_break_rank.
  static std::vector<int> normalize(const std::vector<std::string>& nodes,
                                    const std::vector<double>& raw);
  // Picks what the pod gets on `node` under `profile` and commits it (the request's CPU and
  // memory included), choosing beside `held` too: allocations the model does not count yet
  // (other replicas' claims on the node, docs/high-availability.md), not kept; those of pods the
  // model counts, or that do not fit it, are ignored. Fails, model unchanged, when the pod does
  // not fit now, already holds an allocation, or a PreReserve or Reserve stage refuses (a quota
  // of the current policy: two pods of one tenant that both passed filter).
  Result<model::Allocation> reserve(const model::PodInfo& pod, const model::GpuRequest& req,
                                    const Profile& profile, const std::string& node,
                                    const std::vector<model::Allocation>& held = {});
  // Releases the pod's allocation if it is still exactly `reserved` (an informer may have
  // replaced it meanwhile with what the API server says). Returns whether it did.
  bool unreserve(const model::Allocation& reserved);
  // Releases whatever the pod holds (it finished or left). Returns false if it held nothing.
  bool release(const std::string& pod_uid);
  // PostFilter (preemption_stage.h): per node, the victims whose eviction lets the pod fit.
  // `budgets`: the PodDisruptionBudgets in force (the driver resolves their selectors).
  using VictimQuery = placement::VictimQuery;
  std::vector<std::optional<VictimChoice>> select_victims(
      const model::PodInfo& pod, const model::GpuRequest& req,
      const std::vector<VictimQuery>& nodes,
      const std::vector<DisruptionBudget>& budgets = {}) const;

  // Consolidate (consolidation_stage.h): for a pod no node fits, the fewest movable pods to move
  // so one node fits it, under the current policy's `consolidation` rules (none while they are
  // off). `now_s`: the driver's clock. `request_of`: the request each evicted pod would be placed
  // again with, when the driver knows it (else one derived from what it holds); `started_at`:
  // when a pod started, on the same clock (else no GPU-time is counted for it); `may_move`:
  // whether the driver lets a movable pod be moved now (e.g. not one whose eviction a
  // PodDisruptionBudget refused), on top of the rules (unset: yes).
  using RequestOf = std::function<std::optional<model::GpuRequest>(const model::Allocation&)>;
  using StartedAt = std::function<double(const model::Allocation&)>;
  using MayMove = std::function<bool(const model::Allocation&)>;
  ConsolidationSearch consolidate(const model::PodInfo& pod, const model::GpuRequest& req,
                                  const Profile& profile, double now_s,
                                  const RequestOf& request_of = {},
                                  const StartedAt& started_at = {},
                                  const MayMove& may_move = {}) const;
  // The driver evicted `plan`'s pods at now_s: the rate limits count them from now on.
  void moves_made(const ConsolidationPlan& plan, double now_s);
  // `plan`'s evictions for `pod` are under way: plan.node is held for it (waiting_stage.h; drain.h
  // RoomHold) while the evicted pods the model still holds terminate and the policy's
  // consolidation.holdSeconds after; the driver's clock ticks through expire_holds. Ends when the
  // pod gets an allocation or is forgotten.
  void hold_room(const model::PodInfo& pod, const ConsolidationPlan& plan, double now_s);
  // Ends the pod's hold at once (the evictions it was made for did not happen); whether it had one.
  bool release_room(const std::string& pod_uid);
  // Ends the holds whose time is over at now_s; the write lock only when some are held.
  std::size_t expire_holds(double now_s);
  std::vector<RoomHold> holds() const;

  // --- waiting pods and the drain target (waiting_stage.h) ----------------------------------
  // A pod whose Filter passed no node waits; returns whether it is recorded. `now_s`: the
  // driver's clock, for expire_waiting. kFilter: a Filter of the pod passed no node (confirmed
  // the second time, expires unless seen again); kUnschedulable: the pod's PodScheduled=False
  // condition says kube-scheduler found no node (confirmed at once, never expires).
  enum class WaitSource { kFilter, kUnschedulable };
  bool wait(const model::PodInfo& pod, const model::GpuRequest& req, const Profile& profile,
            double now_s = 0, WaitSource source = WaitSource::kFilter);
  // The pod no longer waits (deleted, gave up; reserve and allocations end waits too).
  bool stop_waiting(const std::string& pod_uid);
  // Forgets pods whose last wait() was before `cutoff_s`; the write lock only when there is one.
  std::size_t expire_waiting(double cutoff_s);
  // The pod holding the drain target and the node, if any; how many pods wait.
  std::optional<DrainReservation> drain() const;
  std::size_t waiting() const;

  // Every point's answer for the pod on each input node (duplicates reported once, input
  // order): filter's verdict and reason, the score's terms, the normalized score, and what
  // reserve would give. Changes nothing: no observe, no reserve, no cache entries.
  std::vector<NodeExplanation> explain(const model::PodInfo& pod, const model::GpuRequest& req,
                                       const Profile& profile,
                                       const std::vector<std::string>& nodes,
                                       std::uint64_t draw = 0) const;

  // (warm-up) Computes the verdicts and scores the warm_shapes request shapes observe() counted
  // most will ask for, so the first pod of each shape after a start, a mix change or a new
  // policy does not pay for every node (server::ScoreWarmer runs it off the pods' path). In
  // chunks of nodes under the read lock; false when `stop()`, a mix change or a policy behind
  // the mix cut it short.
  bool warm(const LoadedPolicy& loaded, const std::function<bool()>& stop) const;

  // --- the model ----------------------------------------------------------------------------
  // Exclusive access (informers, recovery, tests); caches and stages follow the changes after.
  void mutate(const std::function<void(model::Cluster&)>& f);
  // Shared access (debug views, metrics).
  void read(const std::function<void(const model::Cluster&)>& f) const;

  // The mix scoring uses now, and how many pods it was learned from.
  WorkloadMix mix() const;
  std::size_t observed() const;
  // Changes (only) whenever the mix does; cheap (an atomic load, no lock).
  std::uint64_t mix_version() const { return mix_version_.load(); }

  // Usage and limits of the current policy's quotas, per namespace (for metrics).
  std::vector<QuotaRow> quota_rows() const;
  // Why the pod could never fit its namespace's quotas under the current policy, even with
  // nothing of its tenant running (QuotaStage::never_fits); empty when it could.
  std::string quota_never_fits(const model::PodInfo& pod, const model::GpuRequest& req) const;
  // The cluster's namespaces and their labels, which quotas' namespace selectors match (the
  // driver's namespace informer feeds them); a full list, one, or one gone (quota_stage.h).
  void set_namespaces(NamespaceLabels all);
  void set_namespace(const std::string& ns, model::Labels labels);
  void erase_namespace(const std::string& ns);

  // The operators' view of the model under the current mix (placement::summarize), kept current
  // as the model changes (LiveSummary): O(GPU models + MIG profiles) to read.
  ClusterSummary summary() const;

 private:
  // Points the profiles' contexts at this Scheduler's mix and fragment cache.
  std::shared_ptr<const LoadedPolicy> load(Policy policy) const;
  // REQUIRES: read lock. What the stages get for one pod under `policy`.
  StageCall call(const Policy& policy, const model::PodInfo& pod,
                 const model::GpuRequest& req) const;
  // REQUIRES: read lock. PreFilter, the engine's fit and Filter; `passed_nodes`, when given,
  // receives the passed names' nodes (aligned with the result's passed).
  FilterResult filter_locked(const LoadedPolicy& loaded, const model::PodInfo& pod,
                             const model::GpuRequest& req, const std::vector<std::string>& nodes,
                             VerdictCache* cache,
                             std::vector<const model::Node*>* passed_nodes = nullptr) const;
  // REQUIRES: read lock. The Score point over nodes that just passed filter, or named ones.
  std::vector<double> score_locked(const LoadedPolicy& loaded, const model::GpuRequest& req,
                                   const Profile& profile,
                                   const std::vector<const model::Node*>& nodes,
                                   std::uint64_t draw) const;
  std::vector<double> score_named_locked(const LoadedPolicy& loaded, const model::GpuRequest& req,
                                         const Profile& profile,
                                         const std::vector<std::string>& nodes,
                                         std::uint64_t draw) const;
  // REQUIRES: read lock. Score's cache for `loaded`: null when off or behind the mix.
  VerdictCache* score_cache(const LoadedPolicy& loaded) const;
  // REQUIRES: write lock. Caches and stages follow the model's changes; the mix changed.
  void follow_changes();
  void mix_changed();
  // REQUIRES: write lock. Cached scores are stale (the mix, or what the fragment cache says of
  // the whole cluster, changed).
  void scores_changed();
  // The write lock, announced in writers_waiting_ while awaited (warm() steps aside for it).
  std::unique_lock<std::shared_mutex> lock_for_write() const;

  const SchedulerOptions options_;
  mutable std::shared_mutex mu_;  // the model, the stages, the fragment cache and the summary
  mutable std::atomic<int> writers_waiting_{0};
  model::Cluster cluster_;
  Stages stages_;
  FragmentCache fragments_;
  LiveSummary summary_;  // follows fragments_
  std::atomic<std::uint64_t> mix_version_{1};
  mutable std::mutex policy_mu_;
  std::shared_ptr<const LoadedPolicy> policy_;
};

}  // namespace gapless::placement
