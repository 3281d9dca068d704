// The allocation record, gapless.io/allocation (contract.md): written on the Binding at bind,
// read back after a restart. It is the source of truth for what a pod holds.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "gapless/model/allocation.h"
#include "gapless/model/node.h"
#include "gapless/model/result.h"

namespace gapless::k8s {

inline constexpr std::string_view kAllocationAnnotation = "gapless.io/allocation";

// {"v":1,"node":"n","gpus":[{"index":0,"uuid":"GPU-..","memoryMiB":8192,"computeMilli":500}],
//  "mig":[{"gpu":0,"profile":"1g.10gb","start":3}]}
// memoryMiB/computeMilli appear only for shares, gpuMem only for gpushare, "mig" only for MIG.
// With the pod's `node`, each placed MIG entry also names its GPU's "uuid": the node's device
// plugin finds the GPU by it, since a reboot may renumber indices (docs/node-pairing.md).
std::string encode_allocation_record(const model::Allocation& a, const model::Node* node = nullptr);

// Decodes a record for pod (ns, name, uid). Unknown versions, garbage and inconsistent entries
// are errors (the caller fences the node rather than freeing its GPUs).
Result<model::Allocation> decode_allocation_record(std::string_view text, const std::string& ns,
                                                   const std::string& name, const std::string& uid);

// gpushare-device-plugin compatibility (extender-protocol.md §5.1): for an allocation that holds
// aliyun.com/gpu-mem units, the ALIYUN_COM_GPU_MEM_{IDX,POD,DEV,ASSIGNED,ASSUME_TIME} annotations.
// Empty map for other allocations.
std::map<std::string, std::string> gpushare_annotations(const model::Allocation& a,
                                                        const model::Node& node,
                                                        std::int64_t assume_time_unix_nano);

}  // namespace gapless::k8s
