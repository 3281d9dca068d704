// Pod and Node JSON -> the plain data node_fit.h matches, and the nodes' facts as the node
// informer last saw them, for the bind check (kube_binder.h): the extender already watches every
// Node, so a bind needs no read of its node.
#pragma once

#include <mutex>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>

#include "gapless/k8s/informer.h"
#include "gapless/k8s/node_fit.h"

namespace gapless::k8s {

// spec.nodeSelector, spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution
// and spec.tolerations. Entries of the wrong JSON type are read as empty strings (a requirement
// then matches nothing, a toleration tolerates nothing), never skipped: a pod must not pass a
// constraint because Gapless could not read it.
PodPlacement read_pod_placement(const nlohmann::json& pod);

// metadata.name, metadata.labels, spec.taints, spec.unschedulable.
NodeFacts read_node_facts(const nlohmann::json& node);

// Thread-safe: the informer thread feeds it while bind threads read it.
class NodeFactsStore {
 public:
  // `inner` (ClusterSync's node handlers) first, then this store, for every list and event.
  InformerHandlers feed(InformerHandlers inner);
  std::optional<NodeFacts> find(const std::string& name) const;
  // Every value of label `key` on the nodes (the admission webhook's nvidia.com/gpu.product).
  std::set<std::string> label_values(const std::string& key) const;
  void replace(const std::vector<nlohmann::json>& nodes);
  void apply(const std::string& type, const nlohmann::json& node);

 private:
  mutable std::mutex mu_;
  std::unordered_map<std::string, NodeFacts> nodes_;
};

}  // namespace gapless::k8s
