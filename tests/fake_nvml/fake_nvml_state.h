// The fake NVML's state (fake_nvml.cpp describes the fake and its configuration): the handles'
// structs, the scripted machine, the MIG profile tables, and the steps both of its files use.
// fake_nvml.cpp: configuration, devices, topology, events, usage; fake_nvml_mig.cpp: MIG.
//
// Thread-safety: everything here is guarded by fake_nvml::mu.
#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <deque>
#include <list>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "gapless/agent/nvml_api.h"

struct nvmlComputeInstance_st {
  unsigned int id = 0;
  unsigned int profile_id = 0;
  unsigned int slices = 0;
  nvmlGpuInstance_st* gi = nullptr;
  nvmlDevice_t mig_device = nullptr;  // the MIG device handle that stands for this instance
};

struct nvmlGpuInstance_st {
  unsigned int id = 0;
  unsigned int profile_id = 0;
  unsigned int start = 0;
  unsigned int size = 0;
  nvmlDevice_t device = nullptr;
  std::list<nvmlComputeInstance_st> computes;  // list: handles stay valid
};

struct nvmlDevice_st {
  unsigned int index = 0;
  std::string name, uuid, bus_id;
  unsigned long long memory_mib = 0;
  int numa = -1;
  std::vector<std::string> nvlinks;
  std::set<unsigned int> links_down;
  bool has_mig = false;
  bool mig_denied = false;     // "denied": true: profile and instance queries answer NO_PERMISSION
  bool create_denied = false;  // "createDenied": true: creating/destroying answers NO_PERMISSION
  unsigned int mig_mode = 0;
  std::list<nvmlGpuInstance_st> instances;  // list: destroying one keeps the others' handles
  unsigned int next_gi_id = 1;
  bool lost = false;
  bool registered = false;
  bool has_utilization = false;
  nvmlUtilization_t utilization{0, 0};
  std::vector<std::pair<unsigned int, unsigned long long>> processes;  // (pid, MiB)
  // A MIG device handle (nvmlDeviceGetMigDeviceHandleByIndex): its parent and instance ids.
  nvmlDevice_st* parent = nullptr;
  unsigned int gi_id = 0, ci_id = 0;
};

struct nvmlEventSet_st {};

namespace fake_nvml {

using nlohmann::json;

struct Machine {
  std::deque<nvmlDevice_st> gpus;  // deque: handles stay valid
  std::vector<std::vector<int>> levels;
  std::string script;
  std::size_t script_offset = 0;
  std::deque<std::pair<unsigned int, unsigned long long>> xids;  // (gpu, xid)
  nvmlEventSet_st event_set;
  std::deque<nvmlDevice_st> mig_devices;  // MIG device handles, never freed until shutdown
  unsigned int mig_serial = 0;            // makes each MIG device's UUID new
  int created = 0, destroyed = 0;         // GPU instances, for the tests' assertions
  int init_count = 0;                     // nvmlInit_v2 is reference counted, as NVML documents
  bool initialized = false;
};

extern std::mutex mu;
extern Machine machine;

// Compute and memory slices of each GPU-instance profile id (nvml_api.h).
inline constexpr unsigned int kSliceCount[NVML_GPU_INSTANCE_PROFILE_COUNT] = {1, 2, 3, 4, 7,
                                                                              8, 6, 1, 2, 1};
inline constexpr unsigned int kMemorySlices[NVML_GPU_INSTANCE_PROFILE_COUNT] = {1, 2, 4, 4, 8,
                                                                                8, 8, 1, 2, 2};
// Compute slices of each compute-instance profile id.
inline constexpr unsigned int kCiSlices[NVML_COMPUTE_INSTANCE_PROFILE_COUNT] = {1, 2, 3, 4,
                                                                                7, 8, 6, 1};

// Checks a device call's preconditions. REQUIRES: mu held.
nvmlReturn_t check(nvmlDevice_t device);
// The compute-instance profile id that spans `slices` compute slices.
unsigned int ci_profile_of(unsigned int slices);
// A compute instance of `slices` on `gi`, and the MIG device handle that stands for it.
// REQUIRES: mu held.
nvmlComputeInstance_st* add_compute(nvmlGpuInstance_st& gi, unsigned int slices,
                                    unsigned int profile_id);

}  // namespace fake_nvml

#define FAKE_NVML_EXPORT extern "C" __attribute__((visibility("default")))
#define DEVICE_CALL         \
  std::lock_guard lock(mu); \
  if (nvmlReturn_t r = check(device); r != NVML_SUCCESS) return r
