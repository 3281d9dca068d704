// GpuScanner: per-GPU reads (identity, memory, NUMA, MIG) and health. Pairs: pair_scan.cpp.
#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "gapless/agent/gpu_scan.h"
#include "gapless/model/ascii.h"

namespace gapless::agent {

std::string normalise_bus_id(const std::string& bus_id) {
  const std::size_t colon = bus_id.find(':');
  const std::string rest =
      model::ascii_lower(colon == std::string::npos ? bus_id : bus_id.substr(colon + 1));
  if (colon == std::string::npos) return rest;
  const unsigned long domain = std::strtoul(bus_id.substr(0, colon).c_str(), nullptr, 16);
  char head[24];  // "ffffffffffffffff:" at most
  std::snprintf(head, sizeof head, "%lx:", domain);
  return head + rest;
}

std::string model_name(const std::string& nvml_name) {
  std::string out = nvml_name;
  while (!out.empty() && out.back() == ' ') out.pop_back();
  std::replace(out.begin(), out.end(), ' ', '-');
  return out;
}

GpuScanner::GpuScanner(const NvmlLibrary& nvml, NvmlErrorSink on_error)
    : nvml_(nvml), on_error_(std::move(on_error)) {}

bool GpuScanner::failed(nvmlReturn_t r, const std::string& what) {
  if (r == NVML_SUCCESS) return false;
  if (on_error_) on_error_(what + ": " + nvml_.error(r));
  return true;
}

// One GPU's own fields. False when the GPU does not answer (out keeps what it had).
bool GpuScanner::read_gpu(int index, GpuState* out, nvmlDevice_t* handle) {
  const NvmlFunctions& f = nvml_.fn();
  const std::string where = "GPU " + std::to_string(index);
  nvmlDevice_t dev = nullptr;
  if (failed(f.handle_by_index(static_cast<unsigned int>(index), &dev), where + ": handle")) {
    return false;
  }
  char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
  char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE] = {};
  nvmlMemory_t memory{};
  nvmlPciInfo_t pci{};
  if (failed(f.uuid(dev, uuid, sizeof uuid), where + ": UUID") ||
      failed(f.name(dev, name, sizeof name), where + ": name") ||
      failed(f.memory_info(dev, &memory), where + ": memory") ||
      failed(f.pci_info(dev, &pci), where + ": PCI info")) {
    return false;
  }
  out->uuid = uuid;
  out->model = model_name(name);
  out->memory_mib = static_cast<std::int64_t>(memory.total >> 20);
  if (out->memory_mib <= 0) {  // the annotation needs a positive size; such a GPU is not usable
    out->memory_mib = 1;
    out->healthy = false;
  }
  out->bus_id = normalise_bus_id(pci.busId);
  unsigned int numa = 0;
  out->numa = -1;
  // Past 2^31 (e.g. 0xffffffff for "none") it reads as unknown.
  if (f.numa_node != nullptr && f.numa_node(dev, &numa) == NVML_SUCCESS && numa < (1u << 20)) {
    out->numa = static_cast<int>(numa);
  }
  read_mig(dev, out);
  *handle = dev;
  return true;
}

namespace {

// The model's profile for an existing instance: same compute slices, memory width and media
// extension. nvidia-smi's names ("3g.40gb") are derived the same way, from the slices.
const model::MigProfile* profile_of(model::MigFamily family, unsigned int profile_id,
                                    unsigned int compute_slices, unsigned int memory_slices) {
  const bool media = profile_id == NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1 ||
                     profile_id == NVML_GPU_INSTANCE_PROFILE_2_SLICE_REV1;
  for (const model::MigProfile& p : model::mig_profiles(family)) {
    if (p.compute_slices == static_cast<int>(compute_slices) &&
        p.memory_slices == static_cast<int>(memory_slices) && p.media_extensions == media) {
      return &p;
    }
  }
  return nullptr;
}

// Profile ids to ask about. Drivers newer than nvml_api.h add ids past
// NVML_GPU_INSTANCE_PROFILE_COUNT; an instance of one of those must still be seen (its
// slices are taken), so ids are probed beyond the documented ones: unknown ids answer
// INVALID_ARGUMENT or NOT_SUPPORTED, and instances of them are named by their geometry.
constexpr unsigned int kProbedProfiles = 32;

}  // namespace

// MIG mode and the GPU instances that exist. An instance the model has no profile for, or
// instances that cannot be read (no permission: the MIG monitor capability is missing), make
// the GPU unhealthy rather than dropped: leaving them out would offer their slices to pods.
void GpuScanner::read_mig(nvmlDevice_t dev, GpuState* gpu) {
  const NvmlFunctions& f = nvml_.fn();
  gpu->mig_enabled = false;
  gpu->mig_instances.clear();
  unsigned int current = 0, pending = 0;
  if (f.mig_mode == nullptr || f.mig_mode(dev, &current, &pending) != NVML_SUCCESS) return;
  if (current != NVML_DEVICE_MIG_ENABLE) return;
  const model::MigFamily family = model::mig_family_of(gpu->model);
  const std::string where = "GPU " + std::to_string(gpu->index);
  if (family == model::MigFamily::kNone || f.gi_profile_info == nullptr ||
      f.gpu_instances == nullptr || f.gpu_instance_info == nullptr) {
    if (on_error_)
      on_error_(where + ": MIG is on, but Gapless knows no MIG profiles of " + gpu->model);
    gpu->healthy = false;
    return;
  }
  gpu->mig_enabled = true;
  int profiles_read = 0;
  for (unsigned int pid = 0; pid < kProbedProfiles; ++pid) {
    nvmlGpuInstanceProfileInfo_t info{};
    const nvmlReturn_t r = f.gi_profile_info(dev, pid, &info);
    if (r == NVML_ERROR_NOT_SUPPORTED || r == NVML_ERROR_INVALID_ARGUMENT) continue;  // not here
    if (failed(r, where + ": MIG profile " + std::to_string(pid))) {
      gpu->healthy = false;
      continue;
    }
    ++profiles_read;
    read_instances(dev, pid, info, family, gpu);
  }
  // Without any profile the layout is unknown, and an empty list would read as "reconfigurable".
  if (profiles_read == 0) {
    if (on_error_) on_error_(where + ": MIG is on, but no GPU-instance profile could be read");
    gpu->healthy = false;
  }
  std::sort(gpu->mig_instances.begin(), gpu->mig_instances.end(),
            [](const auto& x, const auto& y) { return x.start < y.start; });
}

// The existing instances of one profile. An instance that the model cannot name or that sits
// at a start its profile does not allow (the scheduler would reject the whole annotation) is
// left out, and the GPU marked unhealthy so no pod is placed on the slices it holds.
void GpuScanner::read_instances(nvmlDevice_t dev, unsigned int pid,
                                const nvmlGpuInstanceProfileInfo_t& info, model::MigFamily family,
                                GpuState* gpu) {
  const NvmlFunctions& f = nvml_.fn();
  const std::string where = "GPU " + std::to_string(gpu->index);
  nvmlGpuInstance_t instances[8] = {};
  unsigned int count = 8;
  if (failed(f.gpu_instances(dev, info.id, instances, &count), where + ": GPU instances")) {
    gpu->healthy = false;
    return;
  }
  for (unsigned int i = 0; i < count && i < 8; ++i) {
    nvmlGpuInstanceInfo_t gi{};
    if (failed(f.gpu_instance_info(instances[i], &gi), where + ": GPU instance info")) {
      gpu->healthy = false;
      continue;
    }
    const model::MigProfile* p = profile_of(family, pid, info.sliceCount, gi.placement.size);
    const int start = static_cast<int>(gi.placement.start);
    if (p == nullptr || std::find(p->starts.begin(), p->starts.end(), start) == p->starts.end()) {
      if (on_error_) {
        on_error_(where + ": a MIG instance of profile id " + std::to_string(pid) + " at slice " +
                  std::to_string(start) + " that Gapless cannot describe");
      }
      gpu->healthy = false;
      continue;
    }
    gpu->mig_instances.push_back({std::string(p->name), start});
  }
}

Result<NodeGpus> GpuScanner::scan() {
  const NvmlFunctions& f = nvml_.fn();
  unsigned int count = 0;
  if (nvmlReturn_t r = f.device_count(&count); r != NVML_SUCCESS) {
    failed(r, "GPU count");
    return Error{"cannot count GPUs: " + nvml_.error(r)};
  }
  count = std::min<unsigned int>(count, model::LinkGraph::kMaxGpus);
  NodeGpus out;
  std::vector<nvmlDevice_t> devs(count, nullptr);
  for (int i = 0; i < static_cast<int>(count); ++i) {
    GpuState gpu;
    if (i < static_cast<int>(last_.size())) gpu = last_[i];
    gpu.index = i;
    gpu.healthy = true;
    const bool answered = read_gpu(i, &gpu, &devs[i]);
    if (!answered && gpu.model.empty()) {
      gpu.model = "unknown";
      gpu.memory_mib = 1;
    }
    gpu.healthy = gpu.healthy && answered && sticky_unhealthy_.count(i) == 0;
    out.gpus.push_back(std::move(gpu));
  }
  out.pairs = read_pairs(devs, out.gpus);
  last_ = out.gpus;
  return out;
}

}  // namespace gapless::agent
