// One Kubernetes node as Gapless sees it: its GPUs, how they are wired, and where the inventory
// came from. Pure data; built by the k8s layer from Node objects, by tests and benches directly.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "gapless/model/gpu.h"
#include "gapless/model/host.h"
#include "gapless/model/topology.h"

namespace gapless::model {

// Where a node's GPU inventory came from (contract: "Node inventory", in order of preference).
enum class InventorySource {
  kTopologyAnnotation,  // gapless.io/gpu-topology: exact GPUs, links, MIG layouts
  kFeatureDiscovery,    // NVIDIA GFD labels + allocatable: identical GPUs, PCIe assumed
  kGpushare,            // aliyun.com/gpu-mem + aliyun.com/gpu-count capacity
};

// MIG instances known only as counts (GFD labels, mixed strategy): which GPU holds them is up to
// the device plugin, so Gapless counts them like kube-scheduler does and records no placement.
struct MigPool {
  int total = 0;
  int used = 0;
  bool operator==(const MigPool&) const = default;
};

struct Node {
  std::string name;
  InventorySource source = InventorySource::kTopologyAnnotation;
  std::vector<Gpu> gpus;  // gpus[i].index == i
  LinkGraph links;        // size() == gpus.size()
  std::map<std::string, MigPool> mig_pool;  // profile name -> counts (kFeatureDiscovery only)
  // Gapless's device plugin serves this node's GPUs, as the Node shows it (k8s/node_inventory.h):
  // only then is each Allocate matched to its pod's record, which the pairing gate protects.
  // Independent of `source`: the agent may publish the topology while NVIDIA's plugin allocates.
  bool gapless_device_plugin = false;
  // CPU and memory capacity, and what allocations hold of it. Zero capacity: not tracked (the
  // extender's nodes); the bench sets it so placement can filter like NodeResourcesFit.
  HostResources host;
  HostResources host_used;
  // Pods holding whole GPUs here, by how many each holds (k -> pods). Kept by Cluster; read by
  // strategies that group pods by size (clustering).
  std::map<int, int> whole_pods;

  // A fenced node takes no new Gapless pods (e.g. an allocation record on it could not be read,
  // so Gapless does not know which GPUs are free). The reason is shown to users.
  std::string fence_reason;
  bool fenced() const { return !fence_reason.empty(); }

  // Set by Cluster, not by whoever builds the node. `generation` changes whenever the node's
  // inventory, usage or fence changes, and is unique process-wide, so a cache keyed by it never
  // mistakes a replaced or re-added node for the one it saw. `slot` is a small dense index,
  // unique among the cluster's current nodes (reused after a removal), for per-node tables.
  std::uint64_t generation = 0;
  std::uint32_t slot = 0;
};

// Summary counters used by node scoring; computed from gpus[].used.
struct NodeFill {
  int gpus = 0;            // healthy GPUs
  double used = 0.0;       // healthy GPU capacity in use, in GPUs (a 500-milli share counts 0.5)
  int idle = 0;            // healthy GPUs with nothing on them
};
NodeFill node_fill(const Node& node);

}  // namespace gapless::model
