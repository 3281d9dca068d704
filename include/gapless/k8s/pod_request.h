// Pod object (Kubernetes JSON) -> what it asks of the GPU side.
//
// Effective request per resource, as Kubernetes computes it: max(max over initContainers,
// sum over containers). A resource counts when named in limits or requests (limits win when
// both are present, as extended resources must have them equal).
//
// Resources read (contract.md): nvidia.com/gpu, gapless.io/gpu-memory, gapless.io/gpu-compute,
// gapless.io/gpu-shared-count, nvidia.com/mig-<profile>, aliyun.com/gpu-mem. Other resources are
// not ours and are ignored, except unknown gapless.io/* names, which are errors (a typo would
// otherwise schedule the pod without its GPU).
// Annotations read: gapless.io/gpu-models, gapless.io/topology, gapless.io/policy.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <set>
#include <string>
#include <utility>

#include "gapless/model/request.h"
#include "gapless/model/result.h"

namespace gapless::k8s {

struct ParsedPod {
  model::PodInfo info;
  model::GpuRequest request;
  // Its pairing classes (k8s/device_asks.h): what the bind gate holds for it on its node.
  std::set<std::pair<std::string, std::int64_t>> device_classes;
};

// Errors are one sentence naming the resource or annotation and the bad value, e.g.
// "nvidia.com/gpu: must be a whole number, got \"8Gi\"" or "pod asks for whole GPUs
// (nvidia.com/gpu) and a MIG profile (nvidia.com/mig-1g.10gb) together".
// A pod with no GPU resource parses fine with request.kind == kNone.
Result<ParsedPod> parse_pod(const nlohmann::json& pod);

}  // namespace gapless::k8s
