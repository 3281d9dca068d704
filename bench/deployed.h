// As-deployed mode: the path a pod takes in a real cluster, kube-scheduler in front of the
// extender, with the KubeSchedulerConfiguration Gapless ships (manifests/scheduler-config.yaml)
// or any other. Emulated from kube-scheduler v1.26's code (pkg/scheduler/schedule_one.go,
// framework/plugins/noderesources/, extender.go):
//
//  1. Filter: NodeResourcesFit (CPU and memory requests against allocatable), then, if the pod
//     is interested (it names one of the extender's managedResources, or the list is empty),
//     the extender's filter on the nodes left.
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
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gapless/model/result.h"
#include "replay.h"

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
  int percentage_of_nodes_to_score = 0;  // as written; the emulation scores every node
};

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
// The trace pod as a Kubernetes Pod (JSON) the way the replay submits it.
std::string pod_json(const TracePod& pod, const std::string& uid);

// One static run (the paper's procedure, replay()) through the emulated kube-scheduler.
RunResult replay_deployed(const std::vector<model::Node>& nodes, const Workload& w,
                          const Arrivals& a, const SchedulerConfig& config, ExtenderPort& extender,
                          std::uint64_t seed);

}  // namespace gapless::bench
