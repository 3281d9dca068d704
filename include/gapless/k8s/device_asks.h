// What a pod's containers ask of the resources the Gapless device plugin serves, container by
// container, as the kubelet allocates them; and the pairing annotation (docs/node-pairing.md).
// Shared by the extender's bind gate (placement/pairing_gate.h) and the agent's device plugin
// (agent/pod_match.h), so both read a pod the same way.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gapless::k8s {

// Written by the agent on a pod once its device plugin has served the pod's last container
// asking its resource: {"v":1,"containers":{"<container>":["<device>",...]}}, the devices being
// GPU UUIDs (whole GPUs, shares) or MIG device UUIDs. Closes the pod's entry in the bind gate.
inline constexpr std::string_view kAllocatedAnnotation = "gapless.io/allocated";

// nvidia.com/gpu, gapless.io/gpu-shared-count and nvidia.com/mig-<profile>.
bool is_plugin_resource(std::string_view resource);

struct DeviceAsk {
  std::string container, resource;
  std::int64_t count = 0;
  bool init = false;
};

// Every container's positive ask of a plugin resource, init containers first, each list in the
// pod's order (the kubelet's allocation order). A count is read from limits, else requests
// (extended resources must have both equal); one that is not a whole number counts 0.
std::vector<DeviceAsk> device_asks(const nlohmann::json& pod);

// The pod's pairing classes: the set of (resource, count) of device_asks.
std::set<std::pair<std::string, std::int64_t>> device_classes(const nlohmann::json& pod);

// Whether the pod carries gapless.io/allocated.
bool marked_allocated(const nlohmann::json& pod);

}  // namespace gapless::k8s
