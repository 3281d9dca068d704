// NodeGpus -> the gapless.io/gpu-topology annotation value (contract.md "Node inventory"), the
// text k8s::node_from_topology_annotation parses on the scheduler's side. Pure function.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "gapless/agent/gpu_scan.h"

namespace gapless::agent {

inline constexpr const char* kTopologyAnnotation = "gapless.io/gpu-topology";

// Compact JSON, keys in the contract's order, the same text for the same input (the publisher
// compares texts to decide whether to write). Every GPU is listed with index, uuid, model,
// memoryMiB, numa (when known), healthy, and mig for MIG-capable models. Links: NVLink pairs
// with their lane count, PCIe pairs with their path; SYS pairs are left out (the contract reads
// a missing pair as SYS) unless degraded. A pair that lost lanes carries "degraded": true; one
// that lost all of them is written as PCIe, degraded.
// `in_use_by`: GPU UUID -> the containers ("ns/pod/container") really using it that the model
// does not charge for it (the drift check, drift_monitor.h); such a GPU carries
// "inUseBy": [...] after "healthy", and the scheduler does not offer it.
std::string topology_annotation(
    const NodeGpus& node, const std::map<std::string, std::vector<std::string>>& in_use_by = {});

}  // namespace gapless::agent
