// libnvidia-ml loaded at run time with dlopen(): the agent has no link-time dependency on the
// driver, so one image runs on GPU and non-GPU nodes alike, and tests point it at a fake.
//
// Ownership: an NvmlLibrary owns the dlopen handle and the NVML session (nvmlInit_v2 on open,
// nvmlShutdown and dlclose on destruction); handles obtained through it are valid only while
// it lives. Not copyable.
// Thread-safety: NVML itself is thread-safe, so the function table may be used from several
// threads; the agent calls it from one.
#pragma once

#include <memory>
#include <string>

#include "gapless/agent/nvml_api.h"
#include "gapless/model/result.h"

namespace gapless::agent {

inline constexpr const char* kDefaultNvmlLibrary = "libnvidia-ml.so.1";

// Entry points. The required ones are never null in an opened library; the optional ones
// (older drivers lack them) may be, and callers treat null as NOT_SUPPORTED.
struct NvmlFunctions {
  nvmlInit_v2_fn init = nullptr;
  nvmlShutdown_fn shutdown = nullptr;
  nvmlErrorString_fn error_string = nullptr;
  nvmlDeviceGetCount_v2_fn device_count = nullptr;
  nvmlDeviceGetHandleByIndex_v2_fn handle_by_index = nullptr;
  nvmlDeviceGetUUID_fn uuid = nullptr;
  nvmlDeviceGetName_fn name = nullptr;
  nvmlDeviceGetMemoryInfo_fn memory_info = nullptr;
  nvmlDeviceGetPciInfo_v3_fn pci_info = nullptr;
  nvmlDeviceGetTopologyCommonAncestor_fn common_ancestor = nullptr;
  // Optional.
  nvmlDeviceGetNumaNodeId_fn numa_node = nullptr;
  nvmlDeviceGetNvLinkState_fn nvlink_state = nullptr;
  nvmlDeviceGetNvLinkRemotePciInfo_v2_fn nvlink_remote_pci = nullptr;
  nvmlDeviceGetNvLinkRemoteDeviceType_fn nvlink_remote_type = nullptr;
  nvmlDeviceGetMigMode_fn mig_mode = nullptr;
  nvmlDeviceGetGpuInstanceProfileInfo_fn gi_profile_info = nullptr;
  nvmlDeviceGetGpuInstances_fn gpu_instances = nullptr;
  nvmlGpuInstanceGetInfo_fn gpu_instance_info = nullptr;
  // Optional, MIG instance management (mig_instances.h); all null -> MIG is not served.
  nvmlDeviceCreateGpuInstanceWithPlacement_fn create_gi = nullptr;
  nvmlGpuInstanceDestroy_fn destroy_gi = nullptr;
  nvmlGpuInstanceGetComputeInstanceProfileInfo_fn ci_profile_info = nullptr;
  nvmlGpuInstanceCreateComputeInstance_fn create_ci = nullptr;
  nvmlGpuInstanceGetComputeInstances_fn compute_instances = nullptr;
  nvmlComputeInstanceGetInfo_v2_fn compute_instance_info = nullptr;
  nvmlComputeInstanceDestroy_fn destroy_ci = nullptr;
  nvmlDeviceGetMaxMigDeviceCount_fn max_mig_devices = nullptr;
  nvmlDeviceGetMigDeviceHandleByIndex_fn mig_device_by_index = nullptr;
  nvmlDeviceGetGpuInstanceId_fn mig_gi_id = nullptr;
  nvmlDeviceGetComputeInstanceId_fn mig_ci_id = nullptr;
  nvmlEventSetCreate_fn event_set_create = nullptr;
  nvmlDeviceRegisterEvents_fn register_events = nullptr;
  nvmlEventSetWait_v2_fn event_set_wait = nullptr;
  nvmlEventSetFree_fn event_set_free = nullptr;
  // Usage (gpu_usage.h); optional: an older driver without them reports no usage.
  nvmlDeviceGetUtilizationRates_fn utilization = nullptr;
  nvmlDeviceGetComputeRunningProcesses_fn compute_processes = nullptr;  // _v3, else _v2
};

class NvmlLibrary {
 public:
  // dlopen(path), resolves the entry points and calls nvmlInit_v2. Errors: the library cannot
  // be loaded (dlerror's text), a required symbol is missing, or nvmlInit_v2 fails.
  static Result<std::unique_ptr<NvmlLibrary>> open(const std::string& path);
  ~NvmlLibrary();
  NvmlLibrary(const NvmlLibrary&) = delete;
  NvmlLibrary& operator=(const NvmlLibrary&) = delete;

  const NvmlFunctions& fn() const { return fn_; }
  // "GPU is lost (15)": the library's text for a return code, with the number.
  std::string error(nvmlReturn_t code) const;

 private:
  NvmlLibrary(void* handle, NvmlFunctions fn) : handle_(handle), fn_(fn) {}
  void* handle_;
  NvmlFunctions fn_;
};

}  // namespace gapless::agent
