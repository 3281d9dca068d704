// As-deployed mode: the path a pod takes in a real cluster, kube-scheduler in front of the
// extender, with the KubeSchedulerConfiguration Gapless ships (manifests/scheduler-config.yaml)
// or any other. Emulated from kube-scheduler v1.26's code (pkg/scheduler/schedule_one.go,
// framework/plugins/noderesources/, extender.go):
//
//  1. Filter: NodeResourcesFit (CPU, memory and nvidia.com/gpu requests against allocatable)
//     on the nodes in order from where the last cycle stopped, until numFeasibleNodesToFind
//     (percentageOfNodesToScore, feasible_nodes_to_find) are found; the next cycle starts after
//     the last node looked at (nextStartNodeIndex). kube-scheduler checks 16 nodes at a time and
//     may look at a few more; the emulation looks one by one. Then, if the pod is interested (it
//     names one of the extender's managedResources, or the list is empty), the extender's filter on
//     the nodes left. No node left: the extender is not called (findNodesThatPassExtenders).
//  2. One feasible node: taken, no scoring. Otherwise Score: the enabled in-tree score plugins
//     that differ between the trace's nodes (NodeResourcesFit with its scoring strategy,
//     NodeResourcesBalancedAllocation), each 0..100 x its weight, plus the extender's 0..10 x
//     weight x 10. The other default plugins (TaintToleration, NodeAffinity, PodTopologySpread,
//     InterPodAffinity, ImageLocality) give every trace node the same score: no taints,
//     affinities, spread constraints or images, so they cannot change the pick and are left out.
//  3. selectHost: a uniformly random node among those with the highest total (seeded).
//  4. Bind: the extender's Reserve for an interested pod; otherwise kube-scheduler binds it and
//     the extender learns of it as its pod informer would (CPU and memory on the node).
//
// The extender is either placement::Scheduler in-process (as the extender runs it) or a live
// gapless-extender over HTTP (ExtenderClient).
//
// The dynamic replay as deployed (replay_dynamic_deployed) adds what the extender's pod
// informer sees: a pod that leaves (deleted), and a pod's PodScheduled=False/Unschedulable
// condition, which kube-scheduler writes after every failed cycle, whatever filtered it out.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "gapless/model/result.h"
#include "replay.h"
#include "rng.h"

namespace gapless::bench {

// What the emulation reads of a KubeSchedulerConfiguration (the first profile, the first
// extender).
struct SchedulerConfig {
  std::string source;
  // Extender.
  bool has_extender = false;
  bool filter_verb = false, prioritize_verb = false, bind_verb = false;
  std::int64_t weight = 0;
  std::vector<std::string> managed;  // managedResources names; empty: every pod is interested
  // NodeResourcesFit scoring (weight 0: disabled).
  int fit_weight = 1;
  bool most_allocated = false;  // scoringStrategy.type MostAllocated; else LeastAllocated
  std::int64_t fit_cpu_weight = 1, fit_memory_weight = 1;
  // NodeResourcesBalancedAllocation (weight 0: disabled).
  int balanced_weight = 1;
  // As written; 0 (absent): kube-scheduler's adaptive default. 100 looks at every node.
  int percentage_of_nodes_to_score = 0;
  // Not read from the YAML (gapless-bench --models-as-node-affinity): every pod that names GPU
  // models also carries them as a required nodeAffinity on nvidia.com/gpu.product, so
  // kube-scheduler's own NodeAffinity filter, and with it its sample, knows them. The pin is the
  // admission webhook's (k8s::resolve_model_pin over the nodes' labels, docs/admission-webhook.md):
  // pods carry only the annotation, as users write them, and get what the webhook would add.
  bool models_as_node_affinity = false;
};

// numFeasibleNodesToFind of kube-scheduler v1.26 (schedule_one.go): how many feasible nodes a
// cycle looks for among `all` before it stops filtering. Every node below 100 nodes; otherwise
// `percentage` of them (0: 50 - all/125, at least 5), at least 100.
std::size_t feasible_nodes_to_find(int percentage, std::size_t all);

Result<SchedulerConfig> load_scheduler_config(const std::string& path);
Result<SchedulerConfig> parse_scheduler_config(const std::string& yaml, const std::string& source);

// The extender as the emulated kube-scheduler calls it.
class ExtenderPort {
 public:
  virtual ~ExtenderPort() = default;
  // Filter: the names that pass, in input order. Returns false on an extender error.
  virtual bool filter(const TracePod& pod, const std::string& uid,
                      const std::vector<std::string>& nodes, std::vector<std::string>* passed) = 0;
  // Prioritize: 0..10 per node, aligned with `nodes`.
  virtual bool prioritize(const TracePod& pod, const std::string& uid,
                          const std::vector<std::string>& nodes, std::vector<int>* scores) = 0;
  // Bind: the GPU milli granted, or false when the extender refused.
  virtual bool bind(const TracePod& pod, const std::string& uid, const std::string& node,
                    std::int64_t* granted) = 0;
  // A pod kube-scheduler bound itself (not interested): the extender's informer would see it.
  virtual void bound_elsewhere(const TracePod& pod, const std::string& uid,
                               const std::string& node) = 0;
  // The pod informer sees the pod gone (it finished, or was deleted while pending), whoever
  // bound it: what it held is released and it waits no more.
  virtual void deleted(const std::string& uid) = 0;
  // The pod informer sees kube-scheduler's PodScheduled=False/Unschedulable condition on the
  // pod: it waits (placement::Scheduler::WaitSource::kUnschedulable).
  virtual void unschedulable(const TracePod& pod, const std::string& uid) = 0;

  // Consolidation (docs/consolidation.md). Which pods are movable: those the function names
  // carry the gapless.io/movable annotation and a ReplicaSet owner (pod_json), as a Deployment's
  // opted-in replicas do; unset: none.
  void set_movable(std::function<bool(const std::string& uid)> movable) {
    movable_ = std::move(movable);
  }
  // A pod evicted by a consolidation plan, and the node it ran on.
  struct Eviction {
    std::string uid;
    std::string node;
  };
  // The extender's consolidation driver (server::Consolidator) at time t for a pod that
  // kube-scheduler found no node for: the engine's plan (Scheduler::consolidate, `started_at`
  // each running pod's status.startTime), its node held for the pod (hold_room) and its moves
  // counted (moves_made). Returns the evictions the caller carries out (each pod deleted, its
  // controller's replacement a new pod); empty when there is no plan, the pod fits somewhere
  // now, or the policy's consolidation is off or in dry-run. A live extender's driver needs
  // the Kubernetes API: none here.
  virtual std::vector<Eviction> consolidate(
      const TracePod& pod, const std::string& uid, double t,
      const std::function<double(const std::string&)>& started_at) {
    (void)pod, (void)uid, (void)t, (void)started_at;
    return {};
  }
  // The driver's clock reached t: held rooms whose time is over end (Scheduler::expire_holds).
  virtual void tick(double t) { (void)t; }

 protected:
  bool movable(const std::string& uid) const { return movable_ && movable_(uid); }

 private:
  std::function<bool(const std::string&)> movable_;
};

// placement::Scheduler in-process, configured as gapless-extender runs it.
std::unique_ptr<ExtenderPort> in_process_extender(const std::vector<model::Node>& nodes,
                                                  const PolicySetup& policy);
// A live gapless-extender at `url` (http://host:port[/prefix]), serving a --cluster made from
// the same node list (write_cluster_file). Not thread-safe; one per replay.
std::unique_ptr<ExtenderPort> http_extender(const std::string& url);

// The trace's nodes as a Kubernetes NodeList (JSON) for gapless-extender --cluster: allocatable
// CPU, memory and nvidia.com/gpu, GFD labels for the model.
std::string cluster_file_json(const std::vector<model::Node>& nodes);
// The trace pod as a Kubernetes Pod (JSON) the way the replay submits it; a movable one with
// the gapless.io/movable annotation and a ReplicaSet as its controller.
std::string pod_json(const TracePod& pod, const std::string& uid, bool movable = false);

// kube-scheduler as the emulation runs it: its cache of what the bound pods request per node,
// and one scheduling cycle (steps 1-4 above) through the extender. Every replay's attempts go
// through schedule(). Not thread-safe; one per replay.
class KubeScheduler {
 public:
  // REQUIRES: `nodes`, `config` and `extender` outlive this.
  KubeScheduler(const std::vector<model::Node>& nodes, const SchedulerConfig& config,
                ExtenderPort& extender, std::uint64_t seed);
  std::size_t node_count() const { return nodes_.size(); }
  // NodeResourcesFit's filter: the pod's CPU, memory and nvidia.com/gpu requests fit node n
  // beside the pods bound there.
  bool fits(const TracePod& pod, std::size_t n) const;
  // One cycle. Returns the node the pod was bound to, with *granted the GPU milli the extender
  // gave it (0 when kube-scheduler bound it), or node_count() when it was not bound.
  std::size_t schedule(const TracePod& pod, const std::string& uid, std::int64_t* granted);
  // The pod bound to node n is gone: its requests leave the cache, and the extender hears of it.
  void remove(const TracePod& pod, const std::string& uid, std::size_t n);
  // The index of a node by name (node_count() if none).
  std::size_t index_of(const std::string& node) const {
    auto it = index_.find(node);
    return it == index_.end() ? nodes_.size() : it->second;
  }
  // How many failed cycles of a pod it takes for the samples (each starting where the last
  // stopped) to have covered every node.
  std::size_t cycles_to_cover() const {
    const std::size_t all = nodes_.size();
    const std::size_t per = feasible_nodes_to_find(config_.percentage_of_nodes_to_score, all);
    return per == 0 ? 1 : (all + per - 1) / per;
  }

 private:
  // Requested CPU and memory per node, actual and "non-zero" (a pod without a request counts
  // 100m CPU and 200 MiB for scoring: schedutil.GetNonzeroRequests), and nvidia.com/gpu.
  struct Requested {
    std::int64_t cpu = 0, memory = 0, cpu_nz = 0, memory_nz = 0, gpus = 0;
  };
  // Adds (sign 1) or removes (-1) the pod's requests on node n.
  void account(const TracePod& pod, std::size_t n, int sign);
  // Score and selectHost among feasible_.
  std::string pick(const TracePod& pod, const std::string& uid, bool ours);

  const std::vector<model::Node>& nodes_;
  const SchedulerConfig& config_;
  ExtenderPort& extender_;
  Rng pick_;
  std::vector<Requested> requested_;
  std::map<std::string, std::size_t> index_;
  std::vector<std::string> feasible_;
  std::vector<std::int64_t> total_;
  std::size_t next_start_ = 0;  // nextStartNodeIndex
  // models_as_node_affinity: the nodes' nvidia.com/gpu.product values, and the pin the webhook
  // gives each model list (null: none, a name matched no label), computed once per list.
  std::set<std::string> product_labels_;
  mutable std::map<std::vector<std::string>, std::optional<std::set<std::string>>> pins_;
  const std::optional<std::set<std::string>>& pin(const TracePod& pod) const;
};

// One static run (the paper's procedure, replay()) through the emulated kube-scheduler.
RunResult replay_deployed(const std::vector<model::Node>& nodes, const Workload& w,
                          const Arrivals& a, const SchedulerConfig& config, ExtenderPort& extender,
                          std::uint64_t seed);

// One dynamic run (replay_dynamic's queue, arrivals, lifetimes and retries) whose every attempt
// is a KubeScheduler cycle. A pod that leaves, or gives up, reaches the extender as deleted();
// a pod still waiting after an attempt, or after a retry passed it over, as unschedulable()
// when `unschedulable` is set (the pod informer's path); otherwise the extender knows of
// waiting pods only from its own filter, when kube-scheduler's filter left it some node.
// With options.movable, the pods draw_movable picks are movable (ExtenderPort::set_movable)
// and a multi-GPU pod whose cycle found no node gets the extender's consolidation
// (ExtenderPort::consolidate): the evicted pods leave, their replacements go through
// kube-scheduler at once, then the waiting pod does, its room held by the extender.
DynamicRun replay_dynamic_deployed(const std::vector<model::Node>& nodes, const Workload& w,
                                   const Arrivals& a, const SchedulerConfig& config,
                                   ExtenderPort& extender, std::uint64_t seed,
                                   const DynamicOptions& options, bool unschedulable = true);

}  // namespace gapless::bench
