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

// A node without any GPU inventory is returned with no GPUs (not an error): it simply fails
// every GPU pod as unresolvable. A malformed topology annotation is an error naming the node
// and the field ("node gpu-h100-01: gapless.io/gpu-topology: gpus[3].memoryMiB: must be a
// positive integer").
Result<model::Node> node_from_json(const nlohmann::json& node);

// Parses the gapless.io/gpu-topology annotation value for node `node_name`.
Result<model::Node> node_from_topology_annotation(std::string_view node_name,
                                                  std::string_view annotation);

}  // namespace gapless::k8s
