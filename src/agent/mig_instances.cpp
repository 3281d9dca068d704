// MigInstances: find, create and destroy MIG GPU and compute instances through NVML.
#include "gapless/agent/mig_instances.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "gapless/agent/gpu_scan.h"

namespace gapless::agent {

namespace {

// Profile ids probed when listing a GPU's instances (as gpu_scan.cpp does: newer drivers have
// more than nvml_api.h names).
constexpr unsigned int kProbedProfiles = 32;
constexpr unsigned int kMaxInstances = 8;

struct Gpu {
  nvmlDevice_t dev = nullptr;
  std::string uuid;
  std::string model;
};

// One existing GPU instance.
struct Existing {
  nvmlGpuInstance_t handle = nullptr;
  unsigned int profile_id = 0;  // NVML's id (info.id)
  unsigned int compute_slices = 0;
  int start = 0, size = 0;
};

// nvml_api.h's GPU-instance profile for a model profile: by compute slices, memory width and
// media extensions.
int gi_profile_enum(const model::MigProfile& p) {
  if (p.media_extensions) {
    return p.compute_slices == 1 ? NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1
                                 : NVML_GPU_INSTANCE_PROFILE_2_SLICE_REV1;
  }
  switch (p.compute_slices) {
    case 1:
      return p.memory_slices == 2 ? NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2
                                  : NVML_GPU_INSTANCE_PROFILE_1_SLICE;
    case 2:
      return NVML_GPU_INSTANCE_PROFILE_2_SLICE;
    case 3:
      return NVML_GPU_INSTANCE_PROFILE_3_SLICE;
    case 4:
      return NVML_GPU_INSTANCE_PROFILE_4_SLICE;
    case 7:
      return NVML_GPU_INSTANCE_PROFILE_7_SLICE;
    default:
      return -1;
  }
}

int ci_profile_enum(unsigned int compute_slices) {
  switch (compute_slices) {
    case 1:
      return NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE;
    case 2:
      return NVML_COMPUTE_INSTANCE_PROFILE_2_SLICE;
    case 3:
      return NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE;
    case 4:
      return NVML_COMPUTE_INSTANCE_PROFILE_4_SLICE;
    case 6:
      return NVML_COMPUTE_INSTANCE_PROFILE_6_SLICE;
    case 7:
      return NVML_COMPUTE_INSTANCE_PROFILE_7_SLICE;
    case 8:
      return NVML_COMPUTE_INSTANCE_PROFILE_8_SLICE;
    default:
      return -1;
  }
}

class Calls {
 public:
  explicit Calls(const NvmlLibrary& nvml) : nvml_(nvml), f_(nvml.fn()) {}

  Status check(nvmlReturn_t r, const std::string& what) const {
    if (r == NVML_SUCCESS) return {};
    std::string hint;
    if (r == NVML_ERROR_NO_PERMISSION) {
      hint =
          " (creating MIG instances needs a privileged agent: CAP_SYS_ADMIN and the MIG "
          "config capability)";
    }
    return Error{what + ": " + nvml_.error(r) + hint};
  }

  Result<Gpu> gpu(const std::string& uuid) const {
    unsigned int count = 0;
    if (Status s = check(f_.device_count(&count), "GPU count"); !s.ok()) return Error{s.error()};
    for (unsigned int i = 0; i < count; ++i) {
      Gpu g;
      char id[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
      char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE] = {};
      if (f_.handle_by_index(i, &g.dev) != NVML_SUCCESS) continue;
      if (f_.uuid(g.dev, id, sizeof id) != NVML_SUCCESS || uuid != id) continue;
      if (Status s = check(f_.name(g.dev, name, sizeof name), "GPU " + uuid + ": name"); !s.ok())
        return Error{s.error()};
      g.uuid = id;
      g.model = model_name(name);
      return g;
    }
    return Error{"no GPU " + uuid + " on this node"};
  }

  Result<std::vector<Existing>> instances(const Gpu& g) const {
    std::vector<Existing> out;
    for (unsigned int pid = 0; pid < kProbedProfiles; ++pid) {
      nvmlGpuInstanceProfileInfo_t info{};
      const nvmlReturn_t r = f_.gi_profile_info(g.dev, pid, &info);
      if (r == NVML_ERROR_NOT_SUPPORTED || r == NVML_ERROR_INVALID_ARGUMENT) continue;
      if (Status s = check(r, "GPU " + g.uuid + ": MIG profile"); !s.ok()) return Error{s.error()};
      nvmlGpuInstance_t handles[kMaxInstances] = {};
      unsigned int n = kMaxInstances;
      if (Status s = check(f_.gpu_instances(g.dev, info.id, handles, &n), "GPU instances"); !s.ok())
        return Error{s.error()};
      for (unsigned int i = 0; i < n && i < kMaxInstances; ++i) {
        nvmlGpuInstanceInfo_t gi{};
        if (Status s = check(f_.gpu_instance_info(handles[i], &gi), "GPU instance"); !s.ok())
          return Error{s.error()};
        out.push_back({handles[i], info.id, info.sliceCount, static_cast<int>(gi.placement.start),
                       static_cast<int>(gi.placement.size)});
      }
    }
    return out;
  }

  // The compute instance spanning `gi` (made if missing) and the MIG device's UUID.
  Result<std::string> mig_uuid(const Gpu& g, nvmlGpuInstance_t gi, unsigned int slices) const {
    const int ci_enum = ci_profile_enum(slices);
    nvmlComputeInstanceProfileInfo_t ci_info{};
    if (Status s = check(f_.ci_profile_info(gi, static_cast<unsigned int>(ci_enum),
                                            NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED, &ci_info),
                         "compute instance profile");
        ci_enum < 0 || !s.ok())
      return Error{ci_enum < 0
                       ? "no compute instance profile of " + std::to_string(slices) + " slices"
                       : s.error()};
    nvmlComputeInstance_t ci = nullptr;
    unsigned int n = 1;
    if (Status s = check(f_.compute_instances(gi, ci_info.id, &ci, &n), "compute instances");
        !s.ok())
      return Error{s.error()};
    if (n == 0) {
      if (Status s = check(f_.create_ci(gi, ci_info.id, &ci), "creating the compute instance");
          !s.ok())
        return Error{s.error()};
    }
    nvmlGpuInstanceInfo_t gi_info{};
    nvmlComputeInstanceInfo_t ci_i{};
    if (Status s = check(f_.gpu_instance_info(gi, &gi_info), "GPU instance"); !s.ok())
      return Error{s.error()};
    if (Status s = check(f_.compute_instance_info(ci, &ci_i), "compute instance"); !s.ok())
      return Error{s.error()};
    return device_uuid(g, gi_info.id, ci_i.id);
  }

  // The MIG device of (GPU instance id, compute instance id).
  Result<std::string> device_uuid(const Gpu& g, unsigned int gi_id, unsigned int ci_id) const {
    unsigned int max = 0;
    if (Status s = check(f_.max_mig_devices(g.dev, &max), "MIG device count"); !s.ok())
      return Error{s.error()};
    for (unsigned int i = 0; i < max; ++i) {
      nvmlDevice_t m = nullptr;
      unsigned int gi = 0, ci = 0;
      if (f_.mig_device_by_index(g.dev, i, &m) != NVML_SUCCESS) continue;
      if (f_.mig_gi_id(m, &gi) != NVML_SUCCESS || f_.mig_ci_id(m, &ci) != NVML_SUCCESS) continue;
      if (gi != gi_id || ci != ci_id) continue;
      char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
      if (Status s = check(f_.uuid(m, uuid, sizeof uuid), "MIG device UUID"); !s.ok())
        return Error{s.error()};
      return std::string(uuid);
    }
    return Error{"GPU " + g.uuid + ": no MIG device for GPU instance " + std::to_string(gi_id)};
  }

  Status destroy(nvmlGpuInstance_t gi) const {
    for (unsigned int p = 0; p < NVML_COMPUTE_INSTANCE_PROFILE_COUNT; ++p) {
      nvmlComputeInstance_t cis[kMaxInstances] = {};
      unsigned int n = kMaxInstances;
      if (f_.compute_instances(gi, p, cis, &n) != NVML_SUCCESS) continue;
      for (unsigned int i = 0; i < n && i < kMaxInstances; ++i) {
        if (Status s = check(f_.destroy_ci(cis[i]), "destroying a compute instance"); !s.ok())
          return s;
      }
    }
    return check(f_.destroy_gi(gi), "destroying the GPU instance");
  }

  const NvmlLibrary& nvml_;
  const NvmlFunctions& f_;
};

std::string describe(const Existing& e) {
  return "a MIG instance (NVML profile id " + std::to_string(e.profile_id) + ") at slices " +
         std::to_string(e.start) + "-" + std::to_string(e.start + e.size - 1);
}

// The model's profile `slot` names on this GPU's family, at a start it allows.
Result<const model::MigProfile*> profile_for(const Gpu& gpu, const MigSlot& slot) {
  const model::MigProfile* p =
      model::find_mig_profile(model::mig_family_of(gpu.model), slot.profile);
  if (p == nullptr) {
    return Error{"GPU " + slot.gpu_uuid + " (" + gpu.model + ") has no MIG profile " +
                 slot.profile};
  }
  if (std::find(p->starts.begin(), p->starts.end(), slot.start) == p->starts.end()) {
    return Error{"MIG profile " + slot.profile + " cannot start at slice " +
                 std::to_string(slot.start)};
  }
  return p;
}

// Destroys the instances overlapping [slot.start, slot.start + width) when each is the agent's
// (in `created`, which loses them) and `removable`; else an error naming the first that is not.
// Returns a null handle on success (the caller creates next).
Result<nvmlGpuInstance_t> clear_the_way(const Calls& nvml, const std::vector<Existing>& existing,
                                        const MigSlot& slot, int width,
                                        const std::function<bool(const MigSlot&)>& removable,
                                        std::vector<MigSlot>* created) {
  for (const Existing& e : existing) {
    if (e.start >= slot.start + width || slot.start >= e.start + e.size) continue;
    const auto ours = std::find_if(created->begin(), created->end(), [&](const MigSlot& c) {
      return c.gpu_uuid == slot.gpu_uuid && c.start == e.start;
    });
    const std::string where = "GPU " + slot.gpu_uuid + ": " + describe(e);
    const std::string wanted = slot.profile + " at slice " + std::to_string(slot.start);
    if (ours == created->end()) {
      return Error{where + ", not created by Gapless, is in the way of " + wanted};
    }
    if (!removable(*ours)) {
      return Error{where + " (" + ours->profile +
                   ", created by Gapless) is still in use, in the way of " + wanted};
    }
    if (Status s = nvml.destroy(e.handle); !s.ok()) return Error{where + ": " + s.error()};
    created->erase(ours);
  }
  return nvmlGpuInstance_t{nullptr};
}

Result<nvmlGpuInstance_t> create(const Calls& nvml, const Gpu& gpu, const MigSlot& slot,
                                 unsigned int profile_id, int width) {
  nvmlGpuInstancePlacement_t placement{static_cast<unsigned int>(slot.start),
                                       static_cast<unsigned int>(width)};
  nvmlGpuInstance_t gi = nullptr;
  if (Status s = nvml.check(nvml.f_.create_gi(gpu.dev, profile_id, &placement, &gi),
                            "GPU " + slot.gpu_uuid + ": creating " + slot.profile + " at slice " +
                                std::to_string(slot.start));
      !s.ok())
    return Error{s.error()};
  return gi;
}

}  // namespace

std::string to_string(const MigSlot& slot) {
  return slot.gpu_uuid + " " + slot.profile + "@" + std::to_string(slot.start);
}

MigInstances::MigInstances(const NvmlLibrary& nvml, std::string state_path)
    : nvml_(nvml), path_(std::move(state_path)) {}

bool MigInstances::supported() const {
  const NvmlFunctions& f = nvml_.fn();
  return f.mig_mode && f.gi_profile_info && f.gpu_instances && f.gpu_instance_info && f.create_gi &&
         f.destroy_gi && f.ci_profile_info && f.create_ci && f.compute_instances &&
         f.compute_instance_info && f.destroy_ci && f.max_mig_devices && f.mig_device_by_index &&
         f.mig_gi_id && f.mig_ci_id;
}

Status MigInstances::load() {
  std::lock_guard lock(mu_);
  created_.clear();
  std::ifstream in(path_);
  if (!in) return {};
  std::stringstream text;
  text << in.rdbuf();
  auto j = nlohmann::json::parse(text.str(), nullptr, false);
  if (!j.is_object() || j.value("v", 0) != 1 || !j.contains("instances") ||
      !j["instances"].is_array()) {
    return Error{path_ + ": not a MIG instance list of version 1"};
  }
  std::vector<MigSlot> read;
  for (const auto& e : j["instances"]) {
    if (!e.is_object() || !e.value("gpu", nlohmann::json()).is_string() ||
        !e.value("profile", nlohmann::json()).is_string() ||
        !e.value("start", nlohmann::json()).is_number_integer()) {
      return Error{path_ + ": an entry needs gpu, profile and start"};
    }
    read.push_back({e["gpu"], e["profile"], e["start"].get<int>()});
  }
  created_ = std::move(read);
  return {};
}

Status MigInstances::save() const {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& s : created_) {
    list.push_back({{"gpu", s.gpu_uuid}, {"profile", s.profile}, {"start", s.start}});
  }
  const std::string tmp = path_ + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << nlohmann::json{{"v", 1}, {"instances", list}}.dump() << '\n';
    out.flush();
    if (!out) return Error{"cannot write " + tmp};
  }
  if (std::rename(tmp.c_str(), path_.c_str()) != 0) return Error{"cannot replace " + path_};
  return {};
}

Result<std::string> MigInstances::ensure(const MigSlot& slot,
                                         const std::function<bool(const MigSlot&)>& removable) {
  std::lock_guard lock(mu_);
  handed_[slot] = ++generation_;  // a reaper whose pod list is older must not destroy it now
  if (!supported()) return Error{"this NVML cannot create MIG instances (driver too old)"};
  Calls nvml(nvml_);
  auto gpu = nvml.gpu(slot.gpu_uuid);
  if (!gpu.ok()) return Error{gpu.error()};
  auto p = profile_for(*gpu, slot);
  if (!p.ok()) return Error{p.error()};
  nvmlGpuInstanceProfileInfo_t info{};
  if (Status s = nvml.check(nvml_.fn().gi_profile_info(
                                gpu->dev, static_cast<unsigned int>(gi_profile_enum(**p)), &info),
                            "GPU " + slot.gpu_uuid + ": MIG profile " + slot.profile);
      !s.ok())
    return Error{s.error()};
  auto existing = nvml.instances(*gpu);
  if (!existing.ok()) return Error{existing.error()};
  for (const Existing& e : *existing) {
    if (e.start == slot.start && e.size == (*p)->memory_slices && e.profile_id == info.id) {
      return nvml.mig_uuid(*gpu, e.handle, e.compute_slices);  // already there: reuse
    }
  }
  // created_ changes from here on: every way out saves it.
  auto gi = clear_the_way(nvml, *existing, slot, (*p)->memory_slices, removable, &created_);
  if (gi.ok()) gi = create(nvml, *gpu, slot, info.id, (*p)->memory_slices);
  Result<std::string> uuid = gi.ok() ? Result<std::string>(std::string()) : Error{gi.error()};
  if (gi.ok()) {
    created_.push_back(slot);
    uuid = nvml.mig_uuid(*gpu, *gi, info.sliceCount);
    // Half made: take the GPU instance back rather than leave it for the reaper.
    if (!uuid.ok() && nvml.destroy(*gi).ok()) created_.pop_back();
  }
  if (Status s = save(); !s.ok()) return Error{s.error()};
  return uuid;
}

Status MigInstances::destroy(const MigSlot& slot, std::uint64_t handed_before) {
  std::lock_guard lock(mu_);
  auto ours = std::find(created_.begin(), created_.end(), slot);
  if (ours == created_.end()) return Error{to_string(slot) + " was not created by Gapless"};
  if (auto h = handed_.find(slot); h != handed_.end() && h->second > handed_before) {
    return Error{to_string(slot) + " was handed to a container meanwhile"};
  }
  Calls nvml(nvml_);
  auto gpu = nvml.gpu(slot.gpu_uuid);
  if (!gpu.ok()) return Error{gpu.error()};
  auto existing = nvml.instances(*gpu);
  if (!existing.ok()) return Error{existing.error()};
  for (const Existing& e : *existing) {
    if (e.start != slot.start) continue;
    if (Status s = nvml.destroy(e.handle); !s.ok())
      return Error{to_string(slot) + ": " + s.error()};
  }
  created_.erase(ours);
  return save();
}

std::uint64_t MigInstances::generation() const {
  std::lock_guard lock(mu_);
  return generation_;
}

bool MigInstances::created(const std::string& gpu_uuid, int start) const {
  std::lock_guard lock(mu_);
  return std::any_of(created_.begin(), created_.end(),
                     [&](const MigSlot& s) { return s.gpu_uuid == gpu_uuid && s.start == start; });
}

std::vector<MigSlot> MigInstances::created_slots() const {
  std::lock_guard lock(mu_);
  return created_;
}

void MigInstances::forget_missing() {
  std::lock_guard lock(mu_);
  Calls nvml(nvml_);
  const auto before = created_.size();
  std::erase_if(created_, [&](const MigSlot& slot) {
    auto gpu = nvml.gpu(slot.gpu_uuid);
    if (!gpu.ok()) return false;  // a GPU that does not answer now may come back
    auto existing = nvml.instances(*gpu);
    if (!existing.ok()) return false;
    return std::none_of(existing->begin(), existing->end(),
                        [&](const Existing& e) { return e.start == slot.start; });
  });
  if (created_.size() != before) save().ok();
}

std::map<int, std::string> MigInstances::gpu_uuids() const {
  std::map<int, std::string> out;
  const NvmlFunctions& f = nvml_.fn();
  unsigned int count = 0;
  if (f.device_count(&count) != NVML_SUCCESS) return out;
  for (unsigned int i = 0; i < count; ++i) {
    nvmlDevice_t dev = nullptr;
    char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
    if (f.handle_by_index(i, &dev) == NVML_SUCCESS &&
        f.uuid(dev, uuid, sizeof uuid) == NVML_SUCCESS) {
      out[static_cast<int>(i)] = uuid;
    }
  }
  return out;
}

std::vector<std::string> mig_resources(const NvmlLibrary& nvml) {
  const NvmlFunctions& f = nvml.fn();
  std::set<std::string> out;
  unsigned int count = 0;
  if (f.mig_mode == nullptr || f.device_count(&count) != NVML_SUCCESS) return {};
  for (unsigned int i = 0; i < count; ++i) {
    nvmlDevice_t dev = nullptr;
    unsigned int current = 0, pending = 0;
    char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE] = {};
    if (f.handle_by_index(i, &dev) != NVML_SUCCESS ||
        f.name(dev, name, sizeof name) != NVML_SUCCESS ||
        f.mig_mode(dev, &current, &pending) != NVML_SUCCESS || current != NVML_DEVICE_MIG_ENABLE) {
      continue;
    }
    for (const model::MigProfile& p : model::mig_profiles(model::mig_family_of(model_name(name)))) {
      // "+me" is no valid resource name (NVIDIA's plugin spells it ".me"); Gapless reads neither.
      if (!p.media_extensions) out.insert("nvidia.com/mig-" + std::string(p.name));
    }
  }
  return {out.begin(), out.end()};
}

}  // namespace gapless::agent
