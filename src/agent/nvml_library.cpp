#include "gapless/agent/nvml_library.h"

#include <dlfcn.h>

namespace gapless::agent {

namespace {

// dlsym into a typed pointer. The cast from void* to a function pointer is what POSIX
// requires dlsym users to do.
template <typename Fn>
void resolve(void* handle, const char* symbol, Fn* out) {
  *out = reinterpret_cast<Fn>(dlsym(handle, symbol));
}

// Returns the first required symbol that is missing, or nullptr.
const char* resolve_all(void* h, NvmlFunctions* f) {
  resolve(h, "nvmlInit_v2", &f->init);
  resolve(h, "nvmlShutdown", &f->shutdown);
  resolve(h, "nvmlErrorString", &f->error_string);
  resolve(h, "nvmlDeviceGetCount_v2", &f->device_count);
  resolve(h, "nvmlDeviceGetHandleByIndex_v2", &f->handle_by_index);
  resolve(h, "nvmlDeviceGetUUID", &f->uuid);
  resolve(h, "nvmlDeviceGetName", &f->name);
  resolve(h, "nvmlDeviceGetMemoryInfo", &f->memory_info);
  resolve(h, "nvmlDeviceGetPciInfo_v3", &f->pci_info);
  resolve(h, "nvmlDeviceGetTopologyCommonAncestor", &f->common_ancestor);
  resolve(h, "nvmlDeviceGetNumaNodeId", &f->numa_node);
  resolve(h, "nvmlDeviceGetNvLinkState", &f->nvlink_state);
  resolve(h, "nvmlDeviceGetNvLinkRemotePciInfo_v2", &f->nvlink_remote_pci);
  resolve(h, "nvmlDeviceGetNvLinkRemoteDeviceType", &f->nvlink_remote_type);
  resolve(h, "nvmlDeviceGetMigMode", &f->mig_mode);
  resolve(h, "nvmlDeviceGetGpuInstanceProfileInfo", &f->gi_profile_info);
  resolve(h, "nvmlDeviceGetGpuInstances", &f->gpu_instances);
  resolve(h, "nvmlGpuInstanceGetInfo", &f->gpu_instance_info);
  resolve(h, "nvmlDeviceCreateGpuInstanceWithPlacement", &f->create_gi);
  resolve(h, "nvmlGpuInstanceDestroy", &f->destroy_gi);
  resolve(h, "nvmlGpuInstanceGetComputeInstanceProfileInfo", &f->ci_profile_info);
  resolve(h, "nvmlGpuInstanceCreateComputeInstance", &f->create_ci);
  resolve(h, "nvmlGpuInstanceGetComputeInstances", &f->compute_instances);
  resolve(h, "nvmlComputeInstanceGetInfo_v2", &f->compute_instance_info);
  resolve(h, "nvmlComputeInstanceDestroy", &f->destroy_ci);
  resolve(h, "nvmlDeviceGetMaxMigDeviceCount", &f->max_mig_devices);
  resolve(h, "nvmlDeviceGetMigDeviceHandleByIndex", &f->mig_device_by_index);
  resolve(h, "nvmlDeviceGetGpuInstanceId", &f->mig_gi_id);
  resolve(h, "nvmlDeviceGetComputeInstanceId", &f->mig_ci_id);
  resolve(h, "nvmlEventSetCreate", &f->event_set_create);
  resolve(h, "nvmlDeviceRegisterEvents", &f->register_events);
  resolve(h, "nvmlEventSetWait_v2", &f->event_set_wait);
  resolve(h, "nvmlEventSetFree", &f->event_set_free);
  resolve(h, "nvmlDeviceGetUtilizationRates", &f->utilization);
  resolve(h, "nvmlDeviceGetComputeRunningProcesses_v3", &f->compute_processes);
  if (f->compute_processes == nullptr) {
    resolve(h, "nvmlDeviceGetComputeRunningProcesses_v2", &f->compute_processes);
  }
  const std::pair<const char*, const void*> required[] = {
      {"nvmlInit_v2", reinterpret_cast<const void*>(f->init)},
      {"nvmlShutdown", reinterpret_cast<const void*>(f->shutdown)},
      {"nvmlDeviceGetCount_v2", reinterpret_cast<const void*>(f->device_count)},
      {"nvmlDeviceGetHandleByIndex_v2", reinterpret_cast<const void*>(f->handle_by_index)},
      {"nvmlDeviceGetUUID", reinterpret_cast<const void*>(f->uuid)},
      {"nvmlDeviceGetName", reinterpret_cast<const void*>(f->name)},
      {"nvmlDeviceGetMemoryInfo", reinterpret_cast<const void*>(f->memory_info)},
      {"nvmlDeviceGetPciInfo_v3", reinterpret_cast<const void*>(f->pci_info)},
      {"nvmlDeviceGetTopologyCommonAncestor", reinterpret_cast<const void*>(f->common_ancestor)},
  };
  for (const auto& [name, ptr] : required) {
    if (ptr == nullptr) return name;
  }
  return nullptr;
}

}  // namespace

Result<std::unique_ptr<NvmlLibrary>> NvmlLibrary::open(const std::string& path) {
  dlerror();
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    return Error{"cannot load " + path + ": " + (why != nullptr ? why : "unknown error")};
  }
  NvmlFunctions fn;
  if (const char* missing = resolve_all(handle, &fn)) {
    dlclose(handle);
    return Error{path + " has no " + missing + " (not NVML, or a driver too old)"};
  }
  if (nvmlReturn_t r = fn.init(); r != NVML_SUCCESS) {
    const std::string text = fn.error_string != nullptr ? fn.error_string(r) : "error";
    dlclose(handle);
    return Error{path + ": nvmlInit_v2 failed: " + text + " (" + std::to_string(r) + ")"};
  }
  return std::unique_ptr<NvmlLibrary>(new NvmlLibrary(handle, fn));
}

NvmlLibrary::~NvmlLibrary() {
  fn_.shutdown();
  dlclose(handle_);
}

std::string NvmlLibrary::error(nvmlReturn_t code) const {
  const char* text = fn_.error_string != nullptr ? fn_.error_string(code) : nullptr;
  return std::string(text != nullptr ? text : "NVML error") + " (" + std::to_string(code) + ")";
}

}  // namespace gapless::agent
