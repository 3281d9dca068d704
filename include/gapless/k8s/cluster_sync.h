// Keeps the cluster model in step with the API server: Node events rebuild that node's GPUs
// (keeping its allocations), Pod events account allocations from their gapless.io/allocation
// records (pods bound by anyone, including a previous run of Gapless), and pods that finish or
// are deleted free their GPUs. A record that cannot be decoded or applied fences its node and is
// reported; it never silently frees GPUs.
//
// The pod informer must list pending pods too (field selector
// "status.phase!=Succeeded,status.phase!=Failed", not "spec.nodeName!="): a relist releases the
// allocation of every pod it does not contain, and a pod whose bind is in flight is still
// pending.
//
// Waiting pods (docs/policies.md "Waiting pods"): kube-scheduler calls the extender's filter only
// when its own filters leave some node, so a large pod that no node has room for by
// kube-scheduler's own count never reaches Gapless's filter. What it does write, once per change,
// is the pod's condition PodScheduled=False with reason Unschedulable. A pending GPU pod of our
// scheduler carrying it is reported through `unschedulable`; its wait ends (`stop_waiting`) when it
// is bound, finishes, is deleted, or its condition no longer says Unschedulable (a bind that failed
// says SchedulerError: some node did pass, it waits for no drain).
//
// Thread-safe: informer threads call the handlers concurrently; every change goes through
// `mutate`, which must give exclusive access to the model.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "gapless/k8s/informer.h"
#include "gapless/k8s/pod_request.h"
#include "gapless/model/cluster.h"

namespace gapless::k8s {

// The name of Gapless's profile in kube-scheduler (manifests/scheduler-config.yaml): pods with
// this spec.schedulerName are ours to wait for.
inline constexpr std::string_view kDefaultSchedulerName = "gapless-scheduler";

struct ClusterSyncHooks {
  // Exclusive access to the model (server::Extender::mutate).
  std::function<void(const std::function<void(model::Cluster&)>&)> mutate;
  // A record that fenced its node: pod "ns/name", node, why. Optional.
  std::function<void(const std::string& pod, const std::string& node, const std::string& why)>
      on_bad_record;
  // A fence set for a bad record was lifted (the pod went away, finished, or its record became
  // usable): node, why. Optional; called like on_bad_record.
  std::function<void(const std::string& node, const std::string& why)> on_fence_lifted;
  // A local reservation (a bind in flight, not yet seen on the watch) lost to an allocation
  // record the API server has: pod "ns/name" of the reservation, node, why. Optional; called
  // like on_bad_record.
  std::function<void(const std::string& pod, const std::string& node, const std::string& why)>
      on_reservation_dropped;
  // Every pod seen that has not finished, and pods that finished or were deleted: feeds the
  // learned workload mix (placement::Scheduler::observe / forget). Optional; called inside
  // neither `mutate` nor the sync's own lock.
  std::function<void(const model::PodInfo& pod, const model::GpuRequest& req)> observe;
  std::function<void(const std::string& uid)> forget;
  // A pending pod of our scheduler asking GPUs, parsed, whose condition says kube-scheduler
  // found no node for it (PodScheduled=False, reason Unschedulable): on every event and relist
  // that shows it so (pod.info.uid set). On a relist, new ones come oldest condition first.
  // Reported again after a list of nodes (one judged before its nodes were known may wait
  // now). `stop_waiting`: a pod reported so waits no more (bound, finished, deleted, gone on a
  // relist, or its condition changed). Optional; called like `observe`, one at a time, in the
  // order the sync saw the changes.
  std::function<void(const ParsedPod& pod)> unschedulable;
  std::function<void(const std::string& uid)> stop_waiting;
  // Every pod seen, with its gapless.io/share-overuse annotation (the node agent's mark of a
  // share over its vRAM, docs/gpu-map.md): its text, "" when absent or the pod finished or was
  // deleted. Optional; called like `observe`.
  std::function<void(const std::string& uid, const std::string& overuse)> share_overuse;
  // Log lines. Optional. This and on_bad_record are called outside `mutate`, from either
  // informer thread, possibly at the same time.
  std::function<void(const std::string& message)> log;
};

class ClusterSync {
 public:
  // `scheduler_name`: only pods whose spec.schedulerName equals it are reported unschedulable.
  explicit ClusterSync(ClusterSyncHooks hooks,
                       std::string scheduler_name = std::string(kDefaultSchedulerName));

  // Handlers to give the node and pod informers.
  InformerHandlers node_handlers();
  InformerHandlers pod_handlers();

  // Applies a Node object / Pod object as the informers would (also used by recovery tests).
  void apply_node(const std::string& type, const nlohmann::json& node);
  void apply_pod(const std::string& type, const nlohmann::json& pod);
  void replace_nodes(const std::vector<nlohmann::json>& nodes);
  void replace_pods(const std::vector<nlohmann::json>& pods);

  // Both initial lists applied (in either order: a bound pod whose node is not in the model yet
  // waits for it): the model may serve.
  bool synced() const { return nodes_synced_.load() && pods_synced_.load(); }
  std::size_t bad_records() const { return bad_records_.load(); }
  std::size_t fences_lifted() const { return fences_lifted_.load(); }
  // Local reservations dropped because a record seen on the watch needed their GPUs.
  std::size_t reservations_dropped() const { return reservations_dropped_.load(); }
  // Pods reported unschedulable whose wait has not ended.
  std::size_t unschedulable() const;
  // The resourceVersion of the pod event through which the model counts the pod's allocation as
  // the API server's (bound, record applied), if it does: claims made for it are settled there
  // (k8s::ClaimSettlement).
  std::optional<std::uint64_t> confirmed_at(const std::string& uid) const;
  // The resourceVersion of the event through which the model no longer counts the pod (it
  // finished or was deleted), if the sync saw it lately: a claim for it holds nothing from there.
  std::optional<std::uint64_t> departed_at(const std::string& uid) const;

 private:
  // What a Pod object says, as far as GPUs go.
  struct PodFacts {
    std::string uid, ns, name;
    std::uint64_t version = 0;  // metadata.resourceVersion (0: none, or not a number)
    std::string node;           // spec.nodeName; empty while pending
    bool finished = false;    // Succeeded or Failed
    bool has_record = false;  // carries gapless.io/allocation
    bool record_is_string = false;
    std::string record;
    bool asks_gpus = false;
    bool parsed = false;              // the pod's requests could be read (into `pod`)
    ParsedPod pod;                    // its requests, CPU and memory included
    std::string scheduler;            // spec.schedulerName
    bool unschedulable = false;       // PodScheduled=False, reason Unschedulable
    std::string unschedulable_since;  // that condition's lastTransitionTime (RFC 3339)
    std::string share_overuse;        // the gapless.io/share-overuse annotation's text
  };
  struct Outbox;  // log lines and bad records, emitted after the model is released
  // A pod reported unschedulable: what the hook gets, and since when it waits.
  struct Waiter {
    ParsedPod pod;      // pod.info.uid set
    std::string since;  // the condition's lastTransitionTime
  };
  // Waits begun (or to report again) and ended, reported after the sync's lock is released.
  struct WaitNews {
    std::vector<Waiter> waiting;
    std::vector<std::string> ended;
  };

  static PodFacts pod_facts(const nlohmann::json& pod);
  // REQUIRES: mu_ held, inside mutate.
  void account(model::Cluster& c, const PodFacts& p, Outbox& out);
  void reject(model::Cluster& c, const PodFacts& p, const std::string& why, Outbox& out);
  void upsert(model::Cluster& c, const std::string& name, Result<model::Node> node, Outbox& out);
  void retry_parked(model::Cluster& c, Outbox& out);
  void account_host_only(model::Cluster& c, const PodFacts& p);
  // Applies a bound pod's record `a` that does not fit: the local reservations (allocations the
  // watch has not confirmed) on its node give way, in pod-UID order, and those that no longer
  // fit beside it are dropped. Model unchanged and the restore's error when even that fails.
  Status yield_reservations(model::Cluster& c, const model::Allocation& a, Outbox& out);
  void learn(const PodFacts& p) const;
  // `version`: the resourceVersion of the event that showed the pod gone or finished (0: none).
  void forget(model::Cluster& c, const std::string& uid, Outbox& out, std::uint64_t version = 0);
  // The pod's record no longer fences its node (`why`); lifts the fence when no other rejected
  // record is on that node and the fence is still the one a record set.
  void clear_rejection(model::Cluster& c, const std::string& uid, const std::string& why,
                       Outbox& out);
  void emit(const Outbox& out) const;
  // Whether the pod is ours, pending and found unschedulable (see the class comment).
  bool waits(const PodFacts& p) const;
  // REQUIRES: mu_ held. Follows the pod's wait in waiting_, noting what changed.
  void track_wait(const PodFacts& p, WaitNews& news);
  // REQUIRES: mu_ held. track_wait for a relist: listed pods, and the end of the waits of
  // those not listed; new waits ordered by how long they have waited.
  void relist_waits(const std::vector<PodFacts>& facts,
                    const std::unordered_set<std::string>& running, WaitNews& news);
  // REQUIRES: mu_ held. Every waiting pod again, longest waiting first: after a list of nodes,
  // a pod judged before its nodes were known (no node could take it) may wait now.
  void rereport_waits(WaitNews& news) const;
  void report(const WaitNews& news) const;

  ClusterSyncHooks hooks_;
  const std::string scheduler_name_;
  std::atomic<bool> nodes_synced_{false};
  std::atomic<bool> pods_synced_{false};
  std::atomic<std::size_t> bad_records_{0};
  std::atomic<std::size_t> fences_lifted_{0};
  std::atomic<std::size_t> reservations_dropped_{0};
  // Held from deciding a pod's wait until its hook returns (outside mu_ and mutate): a relist of
  // nodes reporting a pod again must not land after the pod informer ended its wait.
  std::mutex report_mu_;
  mutable std::mutex mu_;  // orders pod bookkeeping across informer threads; taken before `mutate`
  // Bound pods whose node is not in the model yet (the pod informer ran ahead): uid -> pod.
  std::unordered_map<std::string, PodFacts> parked_;
  // Pods whose record fenced their node: uid -> the record (so repeats are not counted again)
  // and the node (so the fence can be lifted when the last such pod is gone or fixed).
  struct Rejected {
    std::string record, node;
  };
  std::unordered_map<std::string, Rejected> rejected_;
  // Pods whose allocation the watch confirmed (bound, record applied), with the resourceVersion
  // that first showed it: the model's other allocations are local reservations, which give way
  // to records (yield_reservations).
  std::unordered_map<std::string, std::uint64_t> confirmed_;
  void confirm(const PodFacts& p) { confirmed_.try_emplace(p.uid, p.version); }
  // Pods seen to finish or go, with that event's resourceVersion: the last kMaxDeparted only
  // (a claim needs it until the next claim write after it, normally milliseconds).
  static constexpr std::size_t kMaxDeparted = 65'536;
  std::unordered_map<std::string, std::uint64_t> departed_;
  std::deque<std::string> departed_order_;
  // GPU pods bound without a record, logged once.
  std::unordered_set<std::string> unrecorded_;
  // Pods reported unschedulable and not ended since (only while the hook is set).
  std::unordered_map<std::string, Waiter> waiting_;
};

}  // namespace gapless::k8s
