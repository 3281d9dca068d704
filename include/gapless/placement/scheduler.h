// The scheduling object: the one place that runs Gapless's stages, for every driver (the extender
// behind HTTP, the trace bench, the latency bench). Named after kube-scheduler's framework:
//
//   PreFilter      select_profile   which policy profile a pod is judged by
//   (learning)     observe          counts the pod in the workload mix, once per pod UID
//   Filter         filter           which candidate nodes can take the pod now, and why not
//                                   (the policy's namespace quotas included: placement/quota.h)
//   Score          score            the engine's score per node in [0, 1] (-1: does not fit)
//   NormalizeScore normalize        those scores -> kube-scheduler's 0..10, best node alone at 10
//   Reserve        reserve          the GPUs / slices / shares on the chosen node, committed
//   Unreserve      unreserve        undoes a reservation that could not be bound
//   PostFilter     select_victims   which lower-priority pods to evict per node (preemption)
//   (waiting)      wait             a large pod that fits no node waits; the oldest holds a
//                                   drain target that Filter and Score keep from other pods
//                                   (placement/drain.h); reserve, stop_waiting, expire end it
//   (debugging)    explain          filter, score, normalize and the pick, per node, read-only
//   (warm-up)      warm             the verdict cache filled for the shapes asked most, off the
//                                   pods' path (after start-up, a mix change, a new policy)
//
// It owns the cluster model, the policy and everything strategies read beyond node and request:
// the workload mix learned from observed pods (or a fixed one, the trace bench's oracle), the
// per-node fragment cache under that mix, and the per-policy verdict cache. Drivers never fill a
// ScoreContext: a policy naming a strategy is enough for the strategy to get what it needs.
//
// Thread-safety: every method may be called concurrently. Filter, Score, PostFilter and explain
// share a read lock; observe (when it counts a new pod), reserve, unreserve, release, mutate and
// the waiting calls (wait for pods large enough to reserve, stop_waiting, forget, expire_waiting
// when something expired) take the write lock. Callbacks given to read() and mutate() run under
// that lock and must not call back.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "gapless/model/allocation.h"
#include "gapless/model/cluster.h"
#include "gapless/model/request.h"
#include "gapless/model/result.h"
#include "gapless/placement/cluster_summary.h"
#include "gapless/placement/drain.h"
#include "gapless/placement/engine.h"
#include "gapless/placement/fragmentation.h"
#include "gapless/placement/preemption.h"
#include "gapless/placement/profile.h"
#include "gapless/placement/verdict_cache.h"
#include "gapless/placement/workload.h"

namespace gapless::placement {

struct SchedulerOptions {
  // Filter checks CPU and memory against the nodes' capacity (where nodes and pods carry them).
  // The trace bench's paper mode needs this: nothing else filters there. Behind kube-scheduler
  // (the extender, the bench's as-deployed mode) NodeResourcesFit has done it, so it is off:
  // host resources are then counted for scoring only and never refuse a reservation.
  bool check_host = true;
  // Score against this fixed mix instead of learning one (the FGD paper's oracle). Must outlive
  // the Scheduler.
  const WorkloadMix* fixed_mix = nullptr;
  // Reuse verdicts and scores of nodes unchanged since a pod of the same shape was asked about
  // (placement::VerdictCache). Off only to measure what the cache saves.
  bool use_cache = true;
  // Request shapes whose verdicts and scores the cache keeps (least recently used dropped).
  std::size_t cache_shapes = 32;
  // Request shapes warm() prepares: the most asked ones (each takes a filter and a score table
  // of the cache_shapes above).
  std::size_t warm_shapes = 8;
};

// A policy with the caches that belong to it: replaced together, so cached scores never outlive
// the profiles they were computed for. Profiles' contexts point at the Scheduler's mix.
struct LoadedPolicy {
  explicit LoadedPolicy(std::size_t cache_shapes) : cache(cache_shapes) {}
  Policy policy;
  mutable VerdictCache cache;
  // The mix version the cache's scores were computed under; a cache behind the Scheduler's
  // current version is not used (a policy replaced while the mix moved on).
  mutable std::atomic<std::uint64_t> cache_mix_version{0};
};

// What the stages say about one node for one pod (Scheduler::explain).
struct NodeExplanation {
  enum class Verdict { kPassed, kFailed, kUnresolvable };
  std::string node;
  Verdict verdict = Verdict::kPassed;
  std::string reason;        // filter's reason; empty when passed
  std::string reason_label;  // its metric label
  ScoreBreakdown score;      // passed only: the engine score's terms and total (raw score)
  int normalized = 0;        // passed only: NormalizeScore's 0..10 among the passing nodes
  std::optional<model::Allocation> placement;  // passed only: what reserve would commit
  std::string placement_error;                 // passed, yet place() found nothing (a bug)
};

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
                                       std::string* error);

  // Counts the pod in the learned workload mix, the first time its UID is seen (later calls for
  // the same UID do nothing, so an informer event and a filter call never count a pod twice).
  // Pods without a UID are not counted. Returns true when the pod was new.
  bool observe(const model::PodInfo& pod, const model::GpuRequest& req);
  // Forgets a pod's UID (it was deleted), keeping what it added to the mix; it waits no more.
  void forget(const std::string& pod_uid);

  // --- the stages ---------------------------------------------------------------------------
  // A pod its namespace's quota refuses is unresolvable on every node (evicting other tenants'
  // pods cannot help), with the quota named in the reason; per-model limits refuse the nodes
  // whose GPUs the pod could use are all of models over their limit.
  FilterResult filter(const LoadedPolicy& loaded, const model::PodInfo& pod,
                      const model::GpuRequest& req, const std::vector<std::string>& nodes) const;
  // Filter as the profile asks: the above, then, when the profile's keep_best is set and more
  // nodes pass, only the keep_best best-scored of them stay (score, then tie_break_rank, as
  // normalize ranks them); the others move to the rejected list with an unresolvable reason.
  // Their scores land in the verdict cache, so the prioritize that follows costs little.
  FilterResult filter(const LoadedPolicy& loaded, const model::PodInfo& pod,
                      const model::GpuRequest& req, const Profile& profile,
                      const std::vector<std::string>& nodes, std::uint64_t draw = 0) const;
  // `draw` feeds strategies that use one (random); give a new value per pod.
  std::vector<double> score(const LoadedPolicy& loaded, const model::GpuRequest& req,
                            const Profile& profile, const std::vector<std::string>& nodes,
                            std::uint64_t draw = 0) const;
  // Score for one pod: the above, with the drain target at -1 unless the pod may have it (for
  // drivers that pick the best score themselves, like the trace bench; behind kube-scheduler,
  // filter has already withheld it).
  std::vector<double> score(const LoadedPolicy& loaded, const model::PodInfo& pod,
                            const model::GpuRequest& req, const Profile& profile,
                            const std::vector<std::string>& nodes, std::uint64_t draw = 0) const;
  // normalize_scores with each node's tie_break_rank.
  static std::vector<int> normalize(const std::vector<std::string>& nodes,
                                    const std::vector<double>& raw);
  // Picks what the pod gets on `node` under `profile` and commits it (the request's CPU and
  // memory included). Fails, model unchanged, when it does not fit now, the pod already holds
  // an allocation, or what it would get puts its namespace over a quota of the current policy
  // (two pods of one tenant that both passed filter: the second is refused here).
  Result<model::Allocation> reserve(const model::PodInfo& pod, const model::GpuRequest& req,
                                    const Profile& profile, const std::string& node);
  // The same, choosing beside `held` too: allocations the model does not count yet (other
  // replicas' claims on the node, README "High availability"). They are not kept; those of
  // pods the model already counts, or that do not fit it, are ignored.
  Result<model::Allocation> reserve(const model::PodInfo& pod, const model::GpuRequest& req,
                                    const Profile& profile, const std::string& node,
                                    const std::vector<model::Allocation>& held);
  // Releases the pod's allocation if it is still exactly `reserved` (an informer may have
  // replaced it meanwhile with what the API server says). Returns whether it did.
  bool unreserve(const model::Allocation& reserved);
  // Releases whatever the pod holds (it finished or left). Returns false if it held nothing.
  bool release(const std::string& pod_uid);
  // PostFilter: per node, the victims whose eviction lets the pod (of pod.priority) fit there
  // (placement::select_victims, with kube-scheduler's proposal for the node). Nullopt for
  // unknown and fenced nodes and nodes where no eviction of lower-priority pods is enough.
  struct VictimQuery {
    std::string node;
    std::vector<ProposedVictim> proposed;
  };
  // `budgets`: the PodDisruptionBudgets in force (the driver resolves their selectors).
  std::vector<std::optional<VictimChoice>> select_victims(
      const model::PodInfo& pod, const model::GpuRequest& req,
      const std::vector<VictimQuery>& nodes,
      const std::vector<DisruptionBudget>& budgets = {}) const;

  // --- waiting pods and the drain target (placement/drain.h) --------------------------------
  // A pod whose Filter passed no node waits. It is recorded (once per UID, oldest first; a
  // later call refreshes its clock) when its profile reserves for pods of its size
  // (Profile::drain_min_gpus), no quota refuses it and some node could take it once emptied.
  // The oldest pod found waiting twice (DrainQueue: one that fails once and goes holds nothing)
  // holds the drain target, re-picked after every change of the model
  // (after a departure the closest host may be another one); Filter and Score withhold it from
  // other pods of no higher priority. `now_s` is the driver's clock, for expire_waiting.
  // Returns whether the pod is recorded.
  //
  // `source` says how the driver knows. kFilter: a Filter of the pod passed no node (the
  // extender, the bench); such a pod is confirmed the second time and expires unless seen
  // again. kUnschedulable: the pod itself says kube-scheduler found no node for it
  // (PodScheduled=False, reason Unschedulable, seen by the pod informer), which it says also
  // when its own filters left no node for the extender to see; the pod is confirmed at once
  // and waits until stop_waiting (bound, deleted) or an allocation ends it, never expiring.
  enum class WaitSource { kFilter, kUnschedulable };
  bool wait(const model::PodInfo& pod, const model::GpuRequest& req, const Profile& profile,
            double now_s = 0, WaitSource source = WaitSource::kFilter);
  // The pod no longer waits (deleted, gave up). Reserve, and any allocation the model gains for
  // it (an informer), end its wait too. Returns whether it was waiting.
  bool stop_waiting(const std::string& pod_uid);
  // Forgets the pods whose last wait() was before `cutoff_s` (pods that left unseen). Takes the
  // write lock only when there is one. Returns how many.
  std::size_t expire_waiting(double cutoff_s);
  // The pod holding the drain target and the node; nullopt when none.
  std::optional<DrainReservation> drain() const;
  // Pods recorded as waiting.
  std::size_t waiting() const;

  // Every stage's answer for the pod on each input node (duplicates reported once, input
  // order): filter's verdict and reason, the score's terms, the normalized score, and what
  // reserve would give. Changes nothing: no observe, no reserve, no cache entries.
  std::vector<NodeExplanation> explain(const model::PodInfo& pod, const model::GpuRequest& req,
                                       const Profile& profile,
                                       const std::vector<std::string>& nodes,
                                       std::uint64_t draw = 0) const;

  // (warm-up) After start-up, a mix change or a new policy, the first pod of each shape pays for
  // every node (a few ms at 5,000 nodes) while later ones reuse the cache. This computes, for
  // the options' warm_shapes request shapes observe() counted most (each under the profile its
  // first pod selects in `loaded`), the verdicts and scores those pods will ask for, so a driver
  // can run it off the pods' path (server::ScoreWarmer). Answers do not change: the cache holds
  // what the stages compute. Works in chunks of nodes, each under the read lock, so the stages
  // and reserve interleave; gives up, returning false, when `stop()` says so, the mix changes or
  // `loaded`'s cache no longer follows the mix. True when every shape was prepared.
  bool warm(const LoadedPolicy& loaded, const std::function<bool()>& stop) const;

  // --- the model ----------------------------------------------------------------------------
  // Exclusive access (informers, recovery, tests); caches follow the changes afterwards.
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

  // --- namespaces ---------------------------------------------------------------------------
  // The cluster's namespaces and their labels, which quotas' namespace selectors match (the
  // driver's namespace informer feeds them). A change applies to the next call: usage is not
  // moved, a relabelled namespace's pods simply count for the quotas that select it now.
  void set_namespaces(NamespaceLabels all);  // a full list: replaces what was known
  void set_namespace(const std::string& ns, model::Labels labels);
  void erase_namespace(const std::string& ns);

  // The operators' view of the model under the current mix (placement::summarize), kept current
  // as the model changes (LiveSummary): O(GPU models + MIG profiles) to read.
  ClusterSummary summary() const;

 private:
  // Points the profiles' contexts at this Scheduler's mix and fragment cache.
  std::shared_ptr<const LoadedPolicy> load(Policy policy) const;
  // REQUIRES: write lock. Keeps the fragment cache current with the model's changes.
  void follow_changes();
  // REQUIRES: read lock. The quota check's inputs; the GPU count is the live summary's.
  QuotaView quota_view() const;
  // REQUIRES: read lock. The cache the Score stage may use for `loaded`: null when caching is off
  // or `loaded`'s scores were computed under an older mix.
  VerdictCache* score_cache(const LoadedPolicy& loaded) const;
  // REQUIRES: read lock. The Filter stage under these quotas.
  // `passed_nodes`, when given, receives the passed names' nodes (aligned with r.passed).
  FilterResult filter_locked(const std::vector<Quota>& quotas, const model::PodInfo& pod,
                             const model::GpuRequest& req, const std::vector<std::string>& nodes,
                             VerdictCache* cache,
                             std::vector<const model::Node*>* passed_nodes = nullptr) const;
  // REQUIRES: read lock. Rejects the passed nodes per-model quota limits refuse; `passed_nodes`
  // is aligned with r->passed before and after.
  void apply_model_quotas(const std::vector<Quota>& quotas, const model::PodInfo& pod,
                          const model::GpuRequest& req, FilterResult* r,
                          std::vector<const model::Node*>* passed_nodes) const;
  // REQUIRES: read lock, and the request fits each node (it just passed filter under it).
  // The Score stage over those nodes.
  std::vector<double> score_locked(const LoadedPolicy& loaded, const model::GpuRequest& req,
                                   const Profile& profile,
                                   const std::vector<const model::Node*>& nodes,
                                   std::uint64_t draw) const;
  // REQUIRES: read lock. The Score stage over nodes named by the driver (Score's form).
  std::vector<double> score_named_locked(const LoadedPolicy& loaded, const model::GpuRequest& req,
                                         const Profile& profile,
                                         const std::vector<std::string>& nodes,
                                         std::uint64_t draw) const;
  // REQUIRES: read lock. Narrows fit->models to the node's models that `pod` may still use
  // under per-model limits, so the pick on a node of several models avoids those over their
  // limit; returns the reason when no usable model is left.
  std::string steer_from_models_over_quota(const std::vector<Quota>& quotas,
                                           const model::PodInfo& pod, const std::string& node_name,
                                           model::GpuRequest* fit) const;
  // REQUIRES: write lock. Records or refreshes a waiting pod (DrainQueue::wait) and picks when
  // it may now hold the target.
  bool refresh_wait(const model::PodInfo& pod, const model::GpuRequest& req, const Profile& profile,
                    double now_s, WaitSource source);
  // REQUIRES: write lock. The drain target chosen again for the model as it is.
  void pick_drain();
  // REQUIRES: write lock. The waiting pods and the drain target after these changes.
  void follow_waiting(const model::Cluster::Changes& changes,
                      const std::vector<const model::Node*>& touched);
  // REQUIRES: write lock. The mix changed: rebuild what depends on it.
  void mix_changed();

  // The write lock on mu_, announced in writers_waiting_ while it is awaited (warm() steps aside
  // between chunks for it).
  std::unique_lock<std::shared_mutex> lock_for_write() const;

  const SchedulerOptions options_;
  mutable std::shared_mutex mu_;  // the model, the mix and the fragment cache
  mutable std::atomic<int> writers_waiting_{0};
  model::Cluster cluster_;
  WorkloadLearner learner_;
  const WorkloadMix* mix_;  // learner_.mix() or options_.fixed_mix
  FragmentCache fragments_;
  LiveSummary summary_;  // follows fragments_
  // Per-namespace usage for quotas: kept current by follow_changes.
  QuotaLedger quota_usage_;
  NamespaceLabels namespaces_;  // guarded by mu_
  std::atomic<std::uint64_t> mix_version_{1};
  // Request shapes counted by observe, with the first pod of each (its profile selection),
  // for warm(). Bounded: shapes beyond kMaxAskedShapes are not tallied.
  struct AskedShape {
    model::GpuRequest req;
    model::PodInfo pod;
    std::size_t count = 0;
  };
  std::vector<AskedShape> asked_;
  std::unordered_map<model::GpuRequest, std::size_t, model::GpuRequestHash> asked_index_;
  // REQUIRES: read lock. The `n` shapes asked most (ties: first asked first) with their profiles
  // in `loaded`, those whose pods select none left out.
  std::vector<std::pair<model::GpuRequest, const Profile*>> most_asked(const LoadedPolicy& loaded,
                                                                       std::size_t n) const;
  // UIDs already counted, oldest first, bounded (pods filtered and never bound fall out).
  std::unordered_set<std::string> seen_;
  std::deque<std::string> seen_order_;

  DrainQueue drain_;  // guarded by mu_

  mutable std::mutex policy_mu_;
  std::shared_ptr<const LoadedPolicy> policy_;
};

}  // namespace gapless::placement
