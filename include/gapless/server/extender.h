// The extender service: kube-scheduler's four verbs over the shared cluster model, independent
// of the transport. Each verb takes the request body and returns the response body; it never
// throws, and a bad request leaves the model unchanged and yields an answer with "Error" set
// (kube-scheduler only reads HTTP 200 bodies, so errors travel inside them).
//
// Wire format (docs/extender-protocol.md): PascalCase keys out, keys matched case-insensitively
// in, null accepted for every field.
//
// The verbs translate between kube-scheduler's wire format and placement::Scheduler, which runs
// every stage (the trace bench drives the same object in-process).
//
// Thread-safety: all methods may be called concurrently. Filter and prioritize share the
// Scheduler's read lock; bind takes the write lock only to reserve and to roll back, never while
// the binder talks to the API server.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json_fwd.hpp>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <vector>

#include "gapless/k8s/binder.h"
#include "gapless/k8s/cluster_sync.h"
#include "gapless/k8s/node_claims.h"
#include "gapless/k8s/pod_request.h"
#include "gapless/model/cluster.h"
#include "gapless/placement/profile.h"
#include "gapless/placement/scheduler.h"
#include "gapless/server/metrics.h"
#include "gapless/server/pairing_waits.h"
#include "gapless/server/pending_pods.h"
#include "gapless/server/share_overuse.h"

namespace gapless::door {
class WorkerPool;  // door/worker_pool.h
}  // namespace gapless::door

namespace gapless::server {

using k8s::Binder;
using k8s::BindRequest;
using k8s::InMemoryBinder;

class Extender {
 public:
  Extender(model::Cluster cluster, placement::Policy policy, Binder& binder, Metrics& metrics);
  ~Extender();  // stops the gate, then the bind threads: what they still hold is answered
  Extender(const Extender&) = delete;
  Extender& operator=(const Extender&) = delete;

  std::string filter(std::string_view body);
  std::string prioritize(std::string_view body);
  // The same for a body held in a std::string: one with 64 bytes of capacity spare behind it
  // (the HTTP server reserves them) is parsed in place instead of copied first (megabytes in
  // full-node mode).
  // `answer_limit` (--max-answer-bytes): an answer that would be larger is not built; an Error
  // says so instead (filter: once the nodes are judged, before the answer is written;
  // prioritize: before any node is scored).
  std::string filter(const std::string& body, std::size_t answer_limit = kNoAnswerLimit);
  std::string prioritize(const std::string& body, std::size_t answer_limit = kNoAnswerLimit);
  static constexpr std::size_t kNoAnswerLimit = static_cast<std::size_t>(-1);
  // Bind, answered through `done`, called exactly once: at once, or later from another thread
  // when the pod had to wait for the pairing gate (docs/node-pairing.md): with pairing on, a
  // bind whose pod asks the same (device resource, count) as a pod on that node that is not yet
  // allocated is parked, without blocking a thread, until that pod is allocated, started or
  // gone; after --pairing-wait it is answered with an Error naming the node and that pod (so
  // kube-scheduler retries), and at shutdown with an Error too.
  void bind_async(std::string body, std::function<void(std::string answer)> done);
  // bind_async, waited for (bench, tests, the synchronous HTTP server).
  std::string bind(std::string_view body);
  std::string preempt(std::string_view body);

  // Turns the pairing gate on (Kubernetes mode: a pod informer must feed pairing_pod_event /
  // pairing_pod_list, or binds alike on one node wait until --pairing-wait). Off by default:
  // without an agent nothing would ever mark a pod allocated. Call before serving.
  void enable_pairing(PairingOptions options);
  // The pod informer's view, for the gate: allocated (gapless.io/allocated), started (phase no
  // longer Pending), deleted; a bound pending pod with a record and no mark holds its classes
  // (after a restart, or bound by another replica). server/pairing_pods.cpp.
  void pairing_pod_event(const std::string& type, const nlohmann::json& pod);
  void pairing_pod_list(const std::vector<nlohmann::json>& pods);
  // Answers every parked bind with an Error, and later binds the gate would hold at once.
  // Idempotent.
  void stop_pairing();

  // Runs binds on `threads` threads of their own, at most `max_queue` waiting for one (more:
  // answered with an Error at once, and kube-scheduler retries the pod). A bind spends most of
  // its time waiting for the API server (claims, Binding); on the caller's thread it would hold
  // one of the HTTP workers that answer filter and prioritize, and kube-scheduler binds many
  // pods at once (--bind-threads). Off by default: binds run on the caller's thread. Call
  // before serving.
  void enable_bind_threads(std::size_t threads, std::size_t max_queue);
  // Stops the gate (stop_pairing), answers the binds waiting for a bind thread with an Error and
  // waits for the running ones; later binds are answered with an Error. Call while the HTTP
  // server still delivers answers, from a thread that is not a bind thread. Idempotent.
  void stop_binds();

  // POST /debug/explain: for an ExtenderArgs (as filter takes), per node the filter verdict and
  // reason, the engine score's terms, the raw and 0..10 scores, and what bind would give the pod
  // (README, "Explain a decision"). Read-only: the model, the mix and the caches are unchanged.
  std::string explain(std::string_view body) const;

  // The model as JSON (nodes, GPUs with usage, allocations as records, policy source), in a
  // deterministic order so two states can be compared byte for byte.
  std::string debug_state() const;
  // GET /ui/map.json: the GPU map page's view (docs/gpu-map.md, src/server/gpu_map.cpp): per node
  // its GPUs and who holds each (pods by index into a table), NVLink islands, health and fences;
  // the cluster strip's counts; the pods waiting and the drain target. Compact and read-only.
  std::string gpu_map() const;
  // GET /ui/explain/<uid>: /debug/explain's answer for a pod filter has seen and that is not
  // bound yet, over every node of the model; an Error when no such pod waits.
  std::string explain_pending(const std::string& uid) const;
  // Prometheus text, with the cluster gauges refreshed.
  std::string metrics_text() const;

  // Replaces the policy for calls that start after this returns.
  void set_policy(placement::Policy policy);
  std::string policy_source() const;

  // Until the model is complete (Kubernetes mode: the first full lists of nodes, pods,
  // namespaces and PodDisruptionBudgets are applied), every verb answers with an Error instead of
  // deciding on a partial model. `ready` is polled on each call; null (the default) means always
  // ready.
  void set_readiness(std::function<bool()> ready);
  bool ready() const;

  // Several replicas (docs/high-availability.md): before the Binding is posted, what bind
  // reserved is claimed through `claims`, checked against the other replicas' claims; a bind
  // whose GPUs another replica claimed first fails (kube-scheduler retries the pod). Null (the
  // default): no claims, for a single replica. Set before serving; must outlive the Extender.
  void set_claims(k8s::NodeClaims* claims) { claims_ = claims; }

  // Where preempt reads the PodDisruptionBudgets in force (Kubernetes mode:
  // k8s::DisruptionBudgets::resolve). With one, victims that would violate a budget are taken
  // last and NumPDBViolations is Gapless's own count; without (the default), kube-scheduler's
  // count plus one for each victim it did not propose. Set before serving.
  void set_disruption_budgets(std::function<std::vector<model::DisruptionBudget>()> budgets) {
    budgets_ = std::move(budgets);
  }

  // Runs `f` with exclusive access to the model (informers, recovery, tests).
  void mutate(const std::function<void(model::Cluster&)>& f);
  // The scheduling object behind the verbs (informers feed its model and its workload mix).
  placement::Scheduler& scheduler() { return scheduler_; }
  const placement::Scheduler& scheduler() const { return scheduler_; }
  // What the informers' ClusterSync needs to keep this extender's model and learned mix
  // current: exclusive access to the model, every pod seen or gone, and the pods that
  // kube-scheduler found no node for (they wait, placement/drain.h). Logging hooks are the
  // caller's to add.
  k8s::ClusterSyncHooks sync_hooks();

 private:
  static constexpr const char* kNotReady =
      "gapless is still loading the cluster (first full lists of nodes, pods, namespaces and "
      "PodDisruptionBudgets); retry shortly";
  // The verbs; `readable`: bytes readable at body.data() (0: only the body).
  std::string filter_body(std::string_view body, std::size_t readable,
                          std::size_t answer_limit = kNoAnswerLimit);
  std::string prioritize_body(std::string_view body, std::size_t readable,
                              std::size_t answer_limit = kNoAnswerLimit);
  // A waiting pod not filtered for this long is forgotten (placement::Scheduler::wait).
  static constexpr double kWaitingTtlSeconds = 600;
  // After filter: expires waiting pods gone unseen, and records the pod as waiting when no node
  // passed, so that a large pod found waiting again holds a node to drain.
  void note_waiting(const k8s::ParsedPod& pod, const placement::Profile& profile,
                    const placement::FilterResult& r);
  // The pod informer saw kube-scheduler give up on the pod (PodScheduled=False, Unschedulable):
  // it waits under the profile filter would select, with no expiry (its wait ends when the
  // informer says so, or it gets an allocation).
  void note_unschedulable(const k8s::ParsedPod& pod);
  // Reserve: the pod's GPUs on `node`, claimed (with claims set) against the other replicas';
  // when one of them claimed part of what was chosen, chosen again beside their claims.
  // *conflict: the last claim lost to another replica's.
  Result<model::Allocation> reserve_claimed(const k8s::ParsedPod& pod,
                                            const placement::Profile& profile,
                                            const std::string& node, bool* conflict);
  // Whether `ours` (reserved in the model) fits on its node beside the other replicas' claims
  // that the model does not count yet.
  Status fits_beside(const model::Allocation& ours,
                     const std::vector<model::Allocation>& others) const;

  // The bind itself (re-check, reserve, Binding), once the gate let it go.
  std::string bind_now(std::string_view body);
  // bind_now on a bind thread (enable_bind_threads), else here; `done` is called exactly once.
  void run_bind(std::string body, std::function<void(std::string answer)> done);

  placement::Scheduler scheduler_;
  k8s::NodeClaims* claims_ = nullptr;
  std::function<std::vector<model::DisruptionBudget>()> budgets_;  // read-only while serving
  // Set once the API source starts, which may be after the score warmer's thread first asks.
  mutable std::mutex ready_mutex_;
  std::function<bool()> ready_;
  Binder& binder_;
  Metrics& metrics_;
  PendingPods pending_;
  // Stopped in ~Extender after the gate, before anything its binds use goes.
  std::unique_ptr<door::WorkerPool> bind_threads_;
  // Last: destroyed first, its parked binds answered while the rest still stands.
  std::unique_ptr<PairingWaits> pairing_;
  ShareOveruseMarks overuse_;  // the GPU map's over-use marks (sync_hooks feeds them)
};

}  // namespace gapless::server
