// NodeGpus -> the gapless.io/gpu-topology annotation value (contract.md "Node inventory"), the
// text k8s::node_from_topology_annotation parses on the scheduler's side. Pure function.
#pragma once

#include <string>

#include "gapless/agent/gpu_scan.h"

namespace gapless::agent {

inline constexpr const char* kTopologyAnnotation = "gapless.io/gpu-topology";

// Compact JSON, keys in the contract's order, the same text for the same input (the publisher
// compares texts to decide whether to write). Every GPU is listed with index, uuid, model,
// memoryMiB, numa (when known), healthy, and mig for MIG-capable models. Links: NVLink pairs
// with their lane count, PCIe pairs with their path; SYS pairs are left out (the contract reads
// a missing pair as SYS) unless degraded. A pair that lost lanes carries "degraded": true; one
// that lost all of them is written as PCIe, degraded.
std::string topology_annotation(const NodeGpus& node);

}  // namespace gapless::agent
