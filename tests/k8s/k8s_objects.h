// Node and Pod objects as the API server serves them, for the sync and integration tests.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "gapless/k8s/allocation_record.h"
#include "gapless/model/allocation.h"

namespace gapless::k8s::testing {

// A node whose gapless.io/gpu-topology annotation lists `gpus` GPUs of `model`; MIG-capable
// models get every GPU in reconfigurable MIG mode when `mig` is set.
inline nlohmann::json topology_node(const std::string& name, int gpus,
                                    const std::string& model = "NVIDIA-H100-80GB-HBM3",
                                    bool mig = false) {
  nlohmann::json list = nlohmann::json::array();
  for (int i = 0; i < gpus; ++i) {
    nlohmann::json g = {{"index", i},
                        {"uuid", name + "-GPU-" + std::to_string(i)},
                        {"model", model},
                        {"memoryMiB", 81920}};
    if (mig) g["mig"] = {{"enabled", true}, {"instances", nlohmann::json::array()}};
    list.push_back(g);
  }
  nlohmann::json links = nlohmann::json::array();
  for (int a = 0; a < gpus; ++a) {
    for (int b = a + 1; b < gpus; ++b) {
      links.push_back({{"a", a}, {"b", b}, {"type", "NVLink"}, {"count", 18}});
    }
  }
  const nlohmann::json topo = {{"version", 1}, {"gpus", list}, {"links", links}};
  return {{"kind", "Node"},
          {"apiVersion", "v1"},
          {"metadata",
           {{"name", name},
            {"resourceVersion", "1"},
            {"annotations", {{"gapless.io/gpu-topology", topo.dump()}}}}}};
}

// A pod of namespace "ml" asking for one whole GPU; bound to `node` unless it is empty, with
// `record` as its gapless.io/allocation unless that is null.
inline nlohmann::json pod_object(const std::string& name, const std::string& uid,
                                 const std::string& node, const nlohmann::json& record = nullptr,
                                 const std::string& phase = "Running") {
  nlohmann::json meta = {
      {"name", name}, {"namespace", "ml"}, {"uid", uid}, {"resourceVersion", "1"}};
  if (!record.is_null()) meta["annotations"] = {{std::string(kAllocationAnnotation), record}};
  nlohmann::json spec = {
      {"containers", {{{"name", "c"}, {"resources", {{"limits", {{"nvidia.com/gpu", "1"}}}}}}}}};
  if (!node.empty()) spec["nodeName"] = node;
  return {{"kind", "Pod"},
          {"apiVersion", "v1"},
          {"metadata", meta},
          {"spec", spec},
          {"status", {{"phase", node.empty() ? "Pending" : phase}}}};
}

// The pod that holds `a`, with its record as Gapless writes it at bind.
inline nlohmann::json bound_pod(const model::Allocation& a, const std::string& phase = "Running") {
  return pod_object(a.pod_name, a.pod_uid, a.node, encode_allocation_record(a), phase);
}

inline model::Allocation whole(const std::string& uid, const std::string& node,
                               std::initializer_list<int> gpus) {
  model::Allocation a;
  a.pod_uid = uid;
  a.pod_ns = "ml";
  a.pod_name = "pod-" + uid;
  a.node = node;
  for (int i : gpus) a.gpus.push_back({i, node + "-GPU-" + std::to_string(i)});
  return a;
}

// `node` as gapless-agent's device plugin leaves it while registered with the kubelet: the
// gapless.io/device-plugin annotation and `gpus` whole GPUs in status.allocatable (what the
// pairing gate asks of a node, docs/node-pairing.md).
inline nlohmann::json with_gapless_plugin(nlohmann::json node, int gpus) {
  node["metadata"]["annotations"]["gapless.io/device-plugin"] =
      "nvidia.com/gpu,gapless.io/gpu-shared-count";
  node["status"]["allocatable"]["nvidia.com/gpu"] = std::to_string(gpus);
  return node;
}

}  // namespace gapless::k8s::testing
