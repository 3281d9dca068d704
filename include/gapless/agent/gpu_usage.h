// What the node's GPUs are really doing (docs/gpu-map.md): per GPU, NVML's utilization and
// memory used, and the memory each compute process holds; each process attributed to its pod
// and container through /proc/<pid>/cgroup, the way DCGM exporter and HAMi attribute.
//
// The NVML calls are optional: a driver without them (or a GPU answering NOT_SUPPORTED) yields
// a sample without utilization or processes, never an error.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gapless/agent/nvml_library.h"

namespace gapless::agent {

struct ProcessMemory {
  unsigned int pid = 0;
  std::int64_t used_mib = -1;  // -1: NVML cannot say
};

struct GpuUsageSample {
  int index = 0;
  std::string uuid;
  int utilization_percent = -1;  // -1: not reported
  std::int64_t memory_used_mib = -1;
  std::int64_t memory_total_mib = -1;
  std::vector<ProcessMemory> processes;
};

// One sample per GPU NVML counts. Errors of single calls go to `error` (may be null).
std::vector<GpuUsageSample> read_gpu_usage(const NvmlLibrary& nvml,
                                           const std::function<void(const std::string&)>& error);

struct CgroupPod {
  std::string pod_uid;       // "1f3c…-…" (the systemd driver's underscores turned back)
  std::string container_id;  // the runtime's ID (64 hex), "" when the path does not end in one
};

// The pod a process belongs to, from the text of its /proc/<pid>/cgroup, under the cgroupfs
// (".../kubepods/burstable/pod<uid>/<id>") or the systemd driver
// (".../kubepods-burstable-pod<uid_with_underscores>.slice/cri-containerd-<id>.scope"), cgroup
// v1 or v2. nullopt for a process outside any pod.
std::optional<CgroupPod> pod_of_cgroup(std::string_view cgroup_text);

// The same read from `proc_root`/<pid>/cgroup ("/proc" on a node; a temporary tree in tests).
std::optional<CgroupPod> pod_of_pid(const std::string& proc_root, unsigned int pid);

}  // namespace gapless::agent
