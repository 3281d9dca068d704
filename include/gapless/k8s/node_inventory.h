// Node object (Kubernetes JSON) -> model::Node, from the best inventory source it carries
// (contract.md "Node inventory"):
//   1. annotation gapless.io/gpu-topology (JSON: gpus, links, MIG layouts, health);
//   2. NVIDIA GFD labels (nvidia.com/gpu.product, gpu.memory) + status.allocatable["nvidia.com/gpu"],
//      plus nvidia.com/mig-<profile> allocatable counts as a MigPool;
//   3. gpushare capacity aliyun.com/gpu-mem + aliyun.com/gpu-count.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>

#include "gapless/model/node.h"
#include "gapless/model/result.h"

namespace gapless::k8s {

// Written by gapless-agent while its device plugin is registered with the node's kubelet: the
// resources it serves, comma-separated ("nvidia.com/gpu,gapless.io/gpu-shared-count"); removed
// when the plugin stops (docs/node-pairing.md, "Which nodes are gated").
inline constexpr std::string_view kDevicePluginAnnotation = "gapless.io/device-plugin";

// Whether Gapless's device plugin allocates this node's GPUs, as the Node shows it: the agent
// states its plugin is registered (kDevicePluginAnnotation) and the kubelet offers devices of
// at least one resource it names (status.allocatable > 0). The kubelet marks the devices of a
// plugin that disconnected unhealthy, so a plugin that died without removing its annotation
// stops counting at the kubelet's next status update. Sets model::Node::gapless_device_plugin.
bool gapless_plugin_allocates(const nlohmann::json& node);

// A node without any GPU inventory is returned with no GPUs (not an error): it simply fails
// every GPU pod as unresolvable. A malformed topology annotation is an error naming the node
// and the field ("node gpu-h100-01: gapless.io/gpu-topology: gpus[3].memoryMiB: must be a
// positive integer").
Result<model::Node> node_from_json(const nlohmann::json& node);

// Parses the gapless.io/gpu-topology annotation value for node `node_name`.
Result<model::Node> node_from_topology_annotation(std::string_view node_name,
                                                  std::string_view annotation);

}  // namespace gapless::k8s
