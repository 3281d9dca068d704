// Node JSON -> model::Node: picks the best inventory source the node carries (contract.md "Node
// inventory"). The topology annotation is parsed in topology_annotation.cpp.
#include "gapless/k8s/node_inventory.h"

#include <map>
#include <string>

#include "gapless/k8s/json_fields.h"
#include "gapless/k8s/mig_resource.h"
#include "gapless/k8s/quantity.h"
#include "gapless/model/mig.h"

namespace gapless::k8s {

using nlohmann::json;

namespace {

constexpr std::string_view kTopologyAnnotation = "gapless.io/gpu-topology";
// The model's limit (GPU sets are 64-bit masks, model/topology.h); above any real node. It was
// 1024, and a node of 65..1024 GPUs then reached placement's 64-bit masks with shifts past bit
// 63 (fuzz/regressions/node/).
constexpr int kMaxGpusPerNode = model::LinkGraph::kMaxGpus;

// The node's status.allocatable, with status.capacity filling in what allocatable omits (static
// inventories written by hand often carry only one of them).
class NodeResources {
 public:
  NodeResources(const json& node, std::string prefix)
      : allocatable_(field_path(node, {"status", "allocatable"})),
        capacity_(field_path(node, {"status", "capacity"})),
        prefix_(std::move(prefix)) {}

  // The quantity of `name`, 0 when the node does not list it (`*found` says which).
  Status get(std::string_view name, std::int64_t* out, bool* found = nullptr) const {
    const json* v = field(allocatable_, name);
    if (v == nullptr) v = field(capacity_, name);
    if (found != nullptr) *found = v != nullptr;
    *out = 0;
    if (v == nullptr) return Status::Ok();
    Result<std::int64_t> q = quantity_value(*v);
    if (!q.ok()) return Error{prefix_ + std::string(name) + ": " + q.error()};
    *out = *q;
    return Status::Ok();
  }

  // nvidia.com/mig-<profile> counts (device plugin, mixed strategy); zero counts are left out.
  Status mig_pool(std::map<std::string, model::MigPool>* out) const {
    for (const json* list : {allocatable_, capacity_}) {
      if (list == nullptr || !list->is_object()) continue;
      for (const auto& [name, value] : list->items()) {
        if (!name.starts_with(kMigResourcePrefix) || name.size() == kMigResourcePrefix.size()) {
          continue;
        }
        std::string profile = mig_profile_from_resource(name.substr(kMigResourcePrefix.size()));
        if (list == capacity_ && field(allocatable_, name) != nullptr) continue;
        std::int64_t total = 0;
        if (Status s = get(name, &total); !s.ok()) return s;
        if (total > kMaxGpusPerNode * model::kMigMemorySlices) {
          return Error{prefix_ + name + ": more MIG instances than any node holds"};
        }
        if (total > 0) (*out)[profile].total = static_cast<int>(total);
      }
    }
    return Status::Ok();
  }

 private:
  const json* allocatable_;
  const json* capacity_;
  std::string prefix_;
};

Status check_gpu_count(std::int64_t count, const std::string& where) {
  if (count > kMaxGpusPerNode) {
    return Error{where + ": " + std::to_string(count) + " GPUs is more than " +
                 std::to_string(kMaxGpusPerNode)};
  }
  return Status::Ok();
}

// Identical GPUs without links (every pair PCIe SYS), as label-based inventories describe them.
void add_identical_gpus(model::Node* node, int count, const std::string& product,
                        std::int64_t memory_mib) {
  node->gpus.clear();
  for (int i = 0; i < count; ++i) {
    model::Gpu gpu;
    gpu.index = i;
    gpu.model = product;
    gpu.memory_mib = memory_mib;
    gpu.mig_family = model::mig_family_of(product);
    node->gpus.push_back(std::move(gpu));
  }
  node->links = model::LinkGraph(count);
}

Status label_quantity(const std::map<std::string, std::string>& labels, const std::string& key,
                      const std::string& prefix, std::int64_t* out, bool* found) {
  auto it = labels.find(key);
  *found = it != labels.end();
  *out = 0;
  if (!*found) return Status::Ok();
  Result<std::int64_t> q = parse_whole_quantity(it->second);
  if (!q.ok()) return Error{prefix + "label " + key + ": " + q.error()};
  *out = *q;
  return Status::Ok();
}

// GFD labels + nvidia.com/gpu and nvidia.com/mig-* resources.
Status feature_discovery(const std::map<std::string, std::string>& labels, std::int64_t count,
                         const std::string& prefix, model::Node* node) {
  if (Status s = check_gpu_count(count, prefix + "nvidia.com/gpu"); !s.ok()) return s;
  std::int64_t memory = 0;
  bool found = false;
  if (Status s = label_quantity(labels, "nvidia.com/gpu.memory", prefix, &memory, &found);
      !s.ok()) {
    return s;
  }
  auto product = labels.find("nvidia.com/gpu.product");
  node->source = model::InventorySource::kFeatureDiscovery;
  add_identical_gpus(node, static_cast<int>(count),
                     product == labels.end() ? std::string() : product->second, memory);
  return Status::Ok();
}

// The one fact about a node's GPUs that only its own kubelet writes (NodeRestriction confines a
// kubelet to its own Node's status): status.capacity nvidia.com/gpu, which the device plugin
// serving the node's GPUs reports. A topology annotation claiming more whole GPUs than that was
// not written by this node's agent, or describes GPUs the kubelet cannot hand out: on clusters
// whose ServiceAccount tokens do not name the node (Kubernetes < 1.30), another node's agent can
// write it (docs/security.md). Capacity, not allocatable: it still counts unhealthy devices,
// which the annotation lists too. MIG-enabled GPUs are left out of the count (the device plugin
// lists their instances, not the GPU, under mixed strategy). Nothing to compare when the node
// lists no nvidia.com/gpu (another device plugin, or none registered yet).
Status check_against_kubelet(const model::Node& claimed, const json& obj,
                             const std::string& prefix) {
  const json* listed = field(field_path(obj, {"status", "capacity"}), "nvidia.com/gpu");
  if (listed == nullptr) return Status::Ok();
  Result<std::int64_t> capacity = quantity_value(*listed);
  if (!capacity.ok()) return Status::Ok();  // the kubelet's own field; not the annotation's fault
  std::int64_t whole = 0;
  for (const model::Gpu& gpu : claimed.gpus) whole += gpu.mig.enabled ? 0 : 1;
  if (whole <= *capacity) return Status::Ok();
  return Error{prefix + std::string(kTopologyAnnotation) + " lists " + std::to_string(whole) +
               " GPUs outside MIG mode, but the node's kubelet reports status.capacity "
               "nvidia.com/gpu " +
               std::to_string(*capacity) +
               ": not trusting the annotation (was it written by another node's agent?)"};
}

// CPU and memory the node offers pods (allocatable, else capacity), for scoring. What cannot be
// read stays 0, "not tracked": kube-scheduler, not Gapless, decides whether pods fit.
model::HostResources host_capacity(const json& node) {
  model::HostResources host;
  for (const char* key : {"allocatable", "capacity"}) {
    const json* list = field_path(node, {"status", key});
    for (auto [name, unit, out] : {std::tuple{"cpu", HostUnit::kMilli, &host.cpu_milli},
                                   std::tuple{"memory", HostUnit::kMiB, &host.memory_mib}}) {
      const json* v = field(list, name);
      if (*out != 0 || v == nullptr || !v->is_string()) continue;
      if (auto q = parse_host_quantity(v->get_ref<const std::string&>(), unit); q.ok()) *out = *q;
    }
  }
  return host;
}

// The GPU inventory, from the best source the node carries.
Result<model::Node> gpu_inventory(const json& obj) {
  const json* meta = field(obj, "metadata");
  const std::string name = meta != nullptr ? string_field(*meta, "name") : std::string();
  if (name.empty()) return Error{"node: metadata.name is missing"};
  const std::string prefix = "node " + name + ": ";

  if (const json* topo = field(field(meta, "annotations"), kTopologyAnnotation)) {
    if (!topo->is_string())
      return Error{prefix + std::string(kTopologyAnnotation) + ": must be a string"};
    Result<model::Node> node =
        node_from_topology_annotation(name, topo->get_ref<const std::string&>());
    if (node.ok()) {
      if (Status s = check_against_kubelet(*node, obj, prefix); !s.ok()) return Error{s.error()};
    }
    return node;
  }

  model::Node node;
  node.name = name;
  node.source = model::InventorySource::kFeatureDiscovery;
  const auto labels = string_map(field(meta, "labels"));
  NodeResources resources(obj, prefix);

  std::int64_t whole = 0;
  bool whole_listed = false;
  if (Status s = resources.get("nvidia.com/gpu", &whole, &whole_listed); !s.ok()) {
    return Error{s.error()};
  }
  if (Status s = resources.mig_pool(&node.mig_pool); !s.ok()) return Error{s.error()};
  if (whole > 0 || !node.mig_pool.empty()) {
    if (Status s = feature_discovery(labels, whole, prefix, &node); !s.ok())
      return Error{s.error()};
    return node;
  }

  // gpushare's device plugin replaces NVIDIA's, so such a node lists no nvidia.com/gpu (it may
  // still carry GFD labels, which is why gpushare is checked before the gpu.count label).
  std::int64_t share_count = 0, share_mem = 0;
  if (Status s = resources.get("aliyun.com/gpu-count", &share_count); !s.ok()) {
    return Error{s.error()};
  }
  if (Status s = resources.get("aliyun.com/gpu-mem", &share_mem); !s.ok()) return Error{s.error()};
  if (share_count > 0) {
    if (Status s = check_gpu_count(share_count, prefix + "aliyun.com/gpu-count"); !s.ok()) {
      return Error{s.error()};
    }
    auto product = labels.find("nvidia.com/gpu.product");
    node.source = model::InventorySource::kGpushare;
    // Memory per GPU is not known from gpushare's resources alone (its units may be GiB).
    add_identical_gpus(&node, static_cast<int>(share_count),
                       product == labels.end() ? std::string() : product->second, 0);
    for (model::Gpu& gpu : node.gpus) gpu.gpushare_capacity = share_mem / share_count;
    return node;
  }

  // Labels alone: only when the device plugin does not list nvidia.com/gpu at all (a listed 0
  // means it currently offers none).
  std::int64_t label_count = 0;
  bool label_found = false;
  if (Status s = label_quantity(labels, "nvidia.com/gpu.count", prefix, &label_count, &label_found);
      !s.ok()) {
    return Error{s.error()};
  }
  if (!whole_listed && label_count > 0) {
    if (Status s = feature_discovery(labels, label_count, prefix, &node); !s.ok()) {
      return Error{s.error()};
    }
  }
  return node;
}

}  // namespace

bool gapless_plugin_allocates(const json& node) {
  const json* listed = field_path(node, {"metadata", "annotations", kDevicePluginAnnotation});
  if (listed == nullptr || !listed->is_string()) return false;
  const json* allocatable = field_path(node, {"status", "allocatable"});
  for (const std::string& resource : comma_list(listed->get_ref<const std::string&>())) {
    const json* offered = field(allocatable, resource);
    if (offered == nullptr) continue;
    if (Result<std::int64_t> q = quantity_value(*offered); q.ok() && *q > 0) return true;
  }
  return false;
}

Result<model::Node> node_from_json(const json& obj) {
  if (!obj.is_object()) return Error{"node: must be a JSON object"};
  Result<model::Node> node = gpu_inventory(obj);
  if (!node.ok()) return node;
  node->host = host_capacity(obj);
  node->gapless_device_plugin = gapless_plugin_allocates(obj);
  return node;
}

}  // namespace gapless::k8s
