// The fake NVML's MIG calls (fake_nvml_state.h): modes and profiles, GPU and compute instances
// created from the configuration or by the agent, MIG device handles, and the state the tests
// read back (gaplessFakeNvmlMigState).
#include <nlohmann/json.hpp>

#include <algorithm>
#include <string>
#include <type_traits>

#include "fake_nvml_state.h"

namespace fake_nvml {

unsigned int ci_profile_of(unsigned int slices) {
  for (unsigned int p = 0; p < NVML_COMPUTE_INSTANCE_PROFILE_COUNT; ++p) {
    if (kCiSlices[p] == slices) return p;
  }
  return 0;
}

nvmlComputeInstance_st* add_compute(nvmlGpuInstance_st& gi, unsigned int slices,
                                    unsigned int profile_id) {
  nvmlDevice_st* parent = gi.device;
  unsigned int id = 0;
  for (const auto& c : gi.computes) id = std::max(id, c.id + 1);
  nvmlDevice_st& mig = machine.mig_devices.emplace_back();
  mig.index = parent->index;
  mig.name = parent->name + " MIG";
  mig.uuid = "MIG-" + std::to_string(++machine.mig_serial) + "-" + parent->uuid.substr(4);
  mig.bus_id = parent->bus_id;
  mig.memory_mib = parent->memory_mib * gi.size / 8;
  mig.parent = parent;
  mig.gi_id = gi.id;
  mig.ci_id = id;
  return &gi.computes.emplace_back(nvmlComputeInstance_st{id, profile_id, slices, &gi, &mig});
}

}  // namespace fake_nvml

using namespace fake_nvml;

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int* current,
                                                   unsigned int* pending) {
  DEVICE_CALL;
  if (!device->has_mig) return NVML_ERROR_NOT_SUPPORTED;
  *current = *pending = device->mig_mode;
  return NVML_SUCCESS;
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfo(
    nvmlDevice_t device, unsigned int profile, nvmlGpuInstanceProfileInfo_t* info) {
  DEVICE_CALL;
  if (!device->has_mig) return NVML_ERROR_NOT_SUPPORTED;
  if (profile >= NVML_GPU_INSTANCE_PROFILE_COUNT) return NVML_ERROR_INVALID_ARGUMENT;
  if (device->mig_denied) return NVML_ERROR_NO_PERMISSION;
  *info = nvmlGpuInstanceProfileInfo_t{};
  info->id = profile;
  info->sliceCount = kSliceCount[profile];
  info->memorySizeMB = device->memory_mib * kSliceCount[profile] / 8;
  return NVML_SUCCESS;
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetGpuInstances(nvmlDevice_t device,
                                                        unsigned int profile_id,
                                                        nvmlGpuInstance_t* instances,
                                                        unsigned int* count) {
  DEVICE_CALL;
  if (!device->has_mig) return NVML_ERROR_NOT_SUPPORTED;
  if (count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (device->mig_denied) return NVML_ERROR_NO_PERMISSION;
  unsigned int found = 0;
  for (auto& inst : device->instances) {
    if (inst.profile_id != profile_id) continue;
    if (found >= *count) return NVML_ERROR_INSUFFICIENT_SIZE;
    instances[found++] = &inst;
  }
  *count = found;
  return NVML_SUCCESS;
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlGpuInstanceGetInfo(nvmlGpuInstance_t instance,
                                                     nvmlGpuInstanceInfo_t* info) {
  std::lock_guard lock(mu);
  if (!machine.initialized) return NVML_ERROR_UNINITIALIZED;
  if (instance == nullptr || info == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  info->device = instance->device;
  info->id = instance->id;
  info->profileId = instance->profile_id;
  info->placement = {instance->start, instance->size};
  return NVML_SUCCESS;
}

// Whether [start, start + size) overlaps an instance of `d`. REQUIRES: mu held.
static bool overlaps(const nvmlDevice_st& d, unsigned int start, unsigned int size) {
  for (const auto& gi : d.instances) {
    if (start < gi.start + gi.size && gi.start < start + size) return true;
  }
  return false;
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceCreateGpuInstanceWithPlacement(
    nvmlDevice_t device, unsigned int profile_id, const nvmlGpuInstancePlacement_t* placement,
    nvmlGpuInstance_t* instance) {
  DEVICE_CALL;
  if (!device->has_mig || device->mig_mode != NVML_DEVICE_MIG_ENABLE) {
    return NVML_ERROR_NOT_SUPPORTED;
  }
  if (placement == nullptr || instance == nullptr ||
      profile_id >= NVML_GPU_INSTANCE_PROFILE_COUNT) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  if (device->create_denied || device->mig_denied) return NVML_ERROR_NO_PERMISSION;
  const unsigned int size = kMemorySlices[profile_id];
  // The real driver checks the profile's placement table; an aligned start is the same rule for
  // the profiles the agent creates.
  if (placement->size != size || placement->start + size > 8 || placement->start % size != 0) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  if (overlaps(*device, placement->start, size)) return NVML_ERROR_INSUFFICIENT_RESOURCES;
  nvmlGpuInstance_st& gi = device->instances.emplace_back();
  gi.id = device->next_gi_id++;
  gi.profile_id = profile_id;
  gi.start = placement->start;
  gi.size = size;
  gi.device = device;
  ++machine.created;
  *instance = &gi;
  return NVML_SUCCESS;
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlGpuInstanceDestroy(nvmlGpuInstance_t instance) {
  std::lock_guard lock(mu);
  if (!machine.initialized) return NVML_ERROR_UNINITIALIZED;
  if (instance == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  nvmlDevice_st* device = instance->device;
  if (device->create_denied || device->mig_denied) return NVML_ERROR_NO_PERMISSION;
  if (!instance->computes.empty()) return NVML_ERROR_IN_USE;  // its compute instances first
  device->instances.remove_if([&](const nvmlGpuInstance_st& gi) { return &gi == instance; });
  ++machine.destroyed;
  return NVML_SUCCESS;
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlGpuInstanceGetComputeInstanceProfileInfo(
    nvmlGpuInstance_t instance, unsigned int profile, unsigned int eng_profile,
    nvmlComputeInstanceProfileInfo_t* info) {
  std::lock_guard lock(mu);
  if (!machine.initialized) return NVML_ERROR_UNINITIALIZED;
  if (instance == nullptr || info == nullptr || profile >= NVML_COMPUTE_INSTANCE_PROFILE_COUNT ||
      eng_profile != NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  if (kCiSlices[profile] > kSliceCount[instance->profile_id]) return NVML_ERROR_NOT_SUPPORTED;
  *info = nvmlComputeInstanceProfileInfo_t{};
  info->id = profile;
  info->sliceCount = kCiSlices[profile];
  info->instanceCount = kSliceCount[instance->profile_id] / kCiSlices[profile];
  return NVML_SUCCESS;
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlGpuInstanceCreateComputeInstance(nvmlGpuInstance_t instance,
                                                                   unsigned int profile_id,
                                                                   nvmlComputeInstance_t* compute) {
  std::lock_guard lock(mu);
  if (!machine.initialized) return NVML_ERROR_UNINITIALIZED;
  if (instance == nullptr || compute == nullptr ||
      profile_id >= NVML_COMPUTE_INSTANCE_PROFILE_COUNT) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  if (instance->device->create_denied) return NVML_ERROR_NO_PERMISSION;
  unsigned int used = 0;
  for (const auto& c : instance->computes) used += c.slices;
  if (used + kCiSlices[profile_id] > kSliceCount[instance->profile_id]) {
    return NVML_ERROR_INSUFFICIENT_RESOURCES;
  }
  *compute = add_compute(*instance, kCiSlices[profile_id], profile_id);
  return NVML_SUCCESS;
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlGpuInstanceGetComputeInstances(nvmlGpuInstance_t instance,
                                                                 unsigned int profile_id,
                                                                 nvmlComputeInstance_t* computes,
                                                                 unsigned int* count) {
  std::lock_guard lock(mu);
  if (!machine.initialized) return NVML_ERROR_UNINITIALIZED;
  if (instance == nullptr || count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  unsigned int found = 0;
  for (auto& c : instance->computes) {
    if (c.profile_id != profile_id) continue;
    if (found >= *count) return NVML_ERROR_INSUFFICIENT_SIZE;
    computes[found++] = &c;
  }
  *count = found;
  return NVML_SUCCESS;
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlComputeInstanceGetInfo_v2(nvmlComputeInstance_t compute,
                                                            nvmlComputeInstanceInfo_t* info) {
  std::lock_guard lock(mu);
  if (!machine.initialized) return NVML_ERROR_UNINITIALIZED;
  if (compute == nullptr || info == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  info->device = compute->gi->device;
  info->gpuInstance = compute->gi;
  info->id = compute->id;
  info->profileId = compute->profile_id;
  info->placement = {0, compute->slices};
  return NVML_SUCCESS;
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlComputeInstanceDestroy(nvmlComputeInstance_t compute) {
  std::lock_guard lock(mu);
  if (!machine.initialized) return NVML_ERROR_UNINITIALIZED;
  if (compute == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (compute->gi->device->create_denied) return NVML_ERROR_NO_PERMISSION;
  compute->mig_device->lost = true;  // a stale handle answers as a device that is gone
  compute->gi->computes.remove_if([&](const nvmlComputeInstance_st& c) { return &c == compute; });
  return NVML_SUCCESS;
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t device,
                                                             unsigned int* count) {
  DEVICE_CALL;
  if (!device->has_mig) return NVML_ERROR_NOT_SUPPORTED;
  *count = 7;
  return NVML_SUCCESS;
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t device,
                                                                  unsigned int index,
                                                                  nvmlDevice_t* mig_device) {
  DEVICE_CALL;
  if (!device->has_mig || device->parent != nullptr) return NVML_ERROR_NOT_SUPPORTED;
  if (mig_device == nullptr || index >= 7) return NVML_ERROR_INVALID_ARGUMENT;
  unsigned int i = 0;
  for (auto& gi : device->instances) {
    for (auto& c : gi.computes) {
      if (i++ == index) {
        *mig_device = c.mig_device;
        return NVML_SUCCESS;
      }
    }
  }
  return NVML_ERROR_NOT_FOUND;
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t device, unsigned int* id) {
  DEVICE_CALL;
  if (device->parent == nullptr) return NVML_ERROR_NOT_SUPPORTED;
  *id = device->gi_id;
  return NVML_SUCCESS;
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t device,
                                                             unsigned int* id) {
  DEVICE_CALL;
  if (device->parent == nullptr) return NVML_ERROR_NOT_SUPPORTED;
  *id = device->ci_id;
  return NVML_SUCCESS;
}

// Not NVML: the fake's MIG state for the tests' assertions (tests/agent/fake_nvml.h), as JSON:
// {"created":N,"destroyed":N,"gpus":[{"index":0,"instances":[{"id":1,"profileId":0,"start":3,
//   "size":1,"computes":[{"id":0,"uuid":"MIG-…"}]}]}]}. Valid until the next call.
FAKE_NVML_EXPORT const char* gaplessFakeNvmlMigState(void) {
  static std::string text;
  std::lock_guard lock(mu);
  json doc = {
      {"created", machine.created}, {"destroyed", machine.destroyed}, {"gpus", json::array()}};
  for (const auto& d : machine.gpus) {
    json instances = json::array();
    for (const auto& gi : d.instances) {
      json computes = json::array();
      for (const auto& c : gi.computes)
        computes.push_back({{"id", c.id}, {"uuid", c.mig_device->uuid}});
      instances.push_back({{"id", gi.id},
                           {"profileId", gi.profile_id},
                           {"start", gi.start},
                           {"size", gi.size},
                           {"computes", computes}});
    }
    doc["gpus"].push_back({{"index", d.index}, {"instances", instances}});
  }
  text = doc.dump();
  return text.c_str();
}

// Every MIG export has the signature the agent's typedef says.
static_assert(std::is_same_v<decltype(&nvmlDeviceGetGpuInstanceProfileInfo),
                             nvmlDeviceGetGpuInstanceProfileInfo_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetGpuInstances), nvmlDeviceGetGpuInstances_fn>);
static_assert(std::is_same_v<decltype(&nvmlGpuInstanceGetInfo), nvmlGpuInstanceGetInfo_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceCreateGpuInstanceWithPlacement),
                             nvmlDeviceCreateGpuInstanceWithPlacement_fn>);
static_assert(std::is_same_v<decltype(&nvmlGpuInstanceDestroy), nvmlGpuInstanceDestroy_fn>);
static_assert(std::is_same_v<decltype(&nvmlGpuInstanceGetComputeInstanceProfileInfo),
                             nvmlGpuInstanceGetComputeInstanceProfileInfo_fn>);
static_assert(std::is_same_v<decltype(&nvmlGpuInstanceCreateComputeInstance),
                             nvmlGpuInstanceCreateComputeInstance_fn>);
static_assert(std::is_same_v<decltype(&nvmlGpuInstanceGetComputeInstances),
                             nvmlGpuInstanceGetComputeInstances_fn>);
static_assert(
    std::is_same_v<decltype(&nvmlComputeInstanceGetInfo_v2), nvmlComputeInstanceGetInfo_v2_fn>);
static_assert(std::is_same_v<decltype(&nvmlComputeInstanceDestroy), nvmlComputeInstanceDestroy_fn>);
static_assert(
    std::is_same_v<decltype(&nvmlDeviceGetMaxMigDeviceCount), nvmlDeviceGetMaxMigDeviceCount_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetMigDeviceHandleByIndex),
                             nvmlDeviceGetMigDeviceHandleByIndex_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetGpuInstanceId), nvmlDeviceGetGpuInstanceId_fn>);
static_assert(
    std::is_same_v<decltype(&nvmlDeviceGetComputeInstanceId), nvmlDeviceGetComputeInstanceId_fn>);
