// What one pod holds: the concrete GPUs, shares and MIG instances. This is what the allocation
// record (gapless.io/allocation) persists, and what Cluster commits and releases.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gapless/model/host.h"

namespace gapless::model {

struct GpuGrant {
  int index = 0;
  std::string uuid;
  std::int64_t memory_mib = 0;     // share only; 0 for a whole GPU
  int compute_milli = 0;           // share only; 0 for a whole GPU
  std::int64_t gpushare_units = 0; // aliyun.com/gpu-mem units
  bool whole() const { return memory_mib == 0 && compute_milli == 0 && gpushare_units == 0; }
  bool operator==(const GpuGrant&) const = default;
};

struct MigGrant {
  int gpu = -1;     // -1: counted in the node's MigPool (GFD inventory), placement unknown
  std::string profile;
  int start = -1;   // memory slice the instance starts at; -1 with gpu == -1
  bool operator==(const MigGrant&) const = default;
};

// Whether consolidation (placement/consolidation.h) may evict a pod to make room. The driver
// decides from the pod itself: kNever for kube-system and DaemonSet pods and for pods no
// controller recreates; kOptedIn for the others marked gapless.io/movable: "true"; kByPolicy for
// the rest, movable only under the policy's priority threshold.
enum class Movability : std::uint8_t { kNever, kByPolicy, kOptedIn };

struct Allocation {
  std::string pod_uid;
  std::string pod_ns;
  std::string pod_name;
  std::string node;
  std::vector<GpuGrant> gpus;
  std::vector<MigGrant> mig;
  HostResources host;  // CPU and memory held on the node (bench only; zero from the extender)
  // The pod's spec.priority, for preemption. Not part of the allocation record: the k8s side
  // fills it from the pod itself, so records stay as they were.
  std::int32_t priority = 0;
  // Not part of the record either: from the pod (PodInfo::movable), for consolidation.
  Movability movable = Movability::kNever;
  // Nor this: PodInfo::started_unix_s, for the GPU-time consolidation's moves lose (-1: unknown).
  std::int64_t started_unix_s = -1;
  bool operator==(const Allocation&) const = default;
};

}  // namespace gapless::model
