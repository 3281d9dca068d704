// The drift check: does every container hold the GPUs its pod's allocation record names?
// Compares what the kubelet really assigned (PodResources, pod_resources.h) with the records
// (gapless.io/allocation) of the node's pods, per container and resource (the union of the
// container's PodResources entries of that resource, however the kubelet splits them), for the
// resources the device plugin serves: nvidia.com/gpu (device ID = GPU UUID),
// gapless.io/gpu-shared-count ("<UUID>::<k>") and nvidia.com/mig-<profile>
// ("<UUID>::slice-<start>"). A container's part of its record is split as the plugin splits it
// (pod_match.h record_parts).
//
// Kinds of drift, each a finding per container and resource:
//   mismatch     the container holds GPUs (MIG: placements) its record does not name for it
//   no-record    a pod without a record holds devices (another scheduler, or the plugin bypassed)
//   unknown-pod  the kubelet lists a pod the API server does not (deleted while still running)
//   double-use   a GPU held whole (or one MIG placement) by containers of two different pods
//   stale        a Running pod's container holds none of the devices its record names for it
// The GPUs to fence are those really in use by a container that the model does not charge for
// them: what the extender must stop offering (mismatch, no-record, unknown-pod). Stale records
// only waste GPUs, so they are reported and not fenced.
//
// Pure function of its inputs, no I/O; deterministic output order.
#pragma once

#include <map>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "gapless/agent/pod_resources.h"

namespace gapless::agent {

enum class DriftKind { kMismatch, kNoRecord, kUnknownPod, kDoubleUse, kStale };
inline constexpr DriftKind kAllDriftKinds[] = {DriftKind::kMismatch, DriftKind::kNoRecord,
                                               DriftKind::kUnknownPod, DriftKind::kDoubleUse,
                                               DriftKind::kStale};
std::string_view to_string(DriftKind kind);  // "mismatch", "no-record", ...

struct DriftFinding {
  DriftKind kind = DriftKind::kMismatch;
  std::string pod_ns, pod_name, pod_uid, container, resource;
  std::vector<std::string> devices;  // the device IDs the kubelet assigned (sorted)
  std::vector<std::string> record;   // what the record names for the container (sorted)
  std::string message;               // one sentence for the pod's Event
  // Identifies the finding across checks (Events are posted once per key).
  std::string key() const;
};

struct DriftReport {
  std::vector<DriftFinding> findings;
  // GPU UUID -> the containers ("ns/pod/container") really using it that the model does not
  // charge for it: the GPUs the extender must not offer.
  std::map<std::string, std::vector<std::string>> fenced;
};

// Whether the device plugin serves `resource` (the resources compared).
bool drift_resource(std::string_view resource);

// `pods`: the node's pod list (GET /api/v1/pods?fieldSelector=spec.nodeName=NODE), read after
// `assigned` (a pod the kubelet lists is then in the API list unless it was deleted).
// `uuid_by_index`: the node's GPUs, for records that name a GPU by index (MIG grants do).
DriftReport find_drift(const nlohmann::json& pods, const std::string& node,
                       const std::vector<AssignedPod>& assigned,
                       const std::map<int, std::string>& uuid_by_index);

}  // namespace gapless::agent
