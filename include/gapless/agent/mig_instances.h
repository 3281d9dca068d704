// The MIG instances the device plugin makes for Gapless's records: a GPU instance of the
// recorded profile at the recorded start slice, with one compute instance spanning it, and the
// MIG device's UUID for the container (NVIDIA_VISIBLE_DEVICES=MIG-…).
//
// What the agent may destroy: only instances it created itself, which it remembers in a JSON
// file ({"v":1,"instances":[{"gpu":"GPU-…","profile":"1g.10gb","start":3}]}, written whole and
// renamed) so a restarted agent still knows them. Instances an operator made (a static layout,
// `nvidia-smi mig -cgi`) are reused when a record names them and never destroyed.
//
// Ownership: borrows the NvmlLibrary, which must outlive it.
// Thread-safety: every public call takes one mutex (the MIG plugins' Allocate calls, the
// reaper and the agent's scan all use it).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "gapless/agent/nvml_library.h"
#include "gapless/model/mig.h"
#include "gapless/model/result.h"

namespace gapless::agent {

struct MigSlot {
  std::string gpu_uuid;
  std::string profile;  // the model's name on that GPU's family, e.g. "1g.10gb"
  int start = 0;        // first memory slice
  bool operator==(const MigSlot&) const = default;
  auto operator<=>(const MigSlot&) const = default;
};

// "GPU-… 1g.10gb@3", for messages.
std::string to_string(const MigSlot& slot);

class MigInstances {
 public:
  MigInstances(const NvmlLibrary& nvml, std::string state_path);

  // Reads the file of instances the agent created. A missing file: none. Errors: unreadable or
  // malformed (the caller logs it; the agent then owns nothing, so destroys nothing).
  Status load();
  // False when the driver lacks the NVML calls to create instances (then MIG is not served).
  bool supported() const;

  // Ensures the GPU instance of `slot` exists with a compute instance spanning it, and returns
  // the MIG device's UUID. An instance already there at that placement is reused (whoever made
  // it). An instance in the way is destroyed only when the agent created it and
  // `removable(its slot)` says no pod uses it; any other is an error that names it. Errors also:
  // the GPU is absent, not MIG-enabled, of a family without that profile, a start the profile
  // does not allow, or NVML refuses (no permission, insufficient resources), each with NVML's
  // reason.
  Result<std::string> ensure(const MigSlot& slot,
                             const std::function<bool(const MigSlot&)>& removable);

  // Destroys an instance the agent created (its compute instances first) and forgets it; one
  // already gone is forgotten. Errors: it is not the agent's, ensure() handed it out after
  // `handed_before` (a generation(): the caller's view of the pods is older than that pod), or
  // NVML refuses (in use, ...).
  Status destroy(const MigSlot& slot, std::uint64_t handed_before = UINT64_MAX);
  // Counts ensure() calls: read it before listing the pods that decide a destroy.
  std::uint64_t generation() const;

  bool created(const std::string& gpu_uuid, int start) const;
  std::vector<MigSlot> created_slots() const;
  // Forgets created instances that no longer exist on their GPU (destroyed by someone else).
  void forget_missing();
  // Every GPU's UUID by index (records name GPUs by index).
  std::map<int, std::string> gpu_uuids() const;

 private:
  Status save() const;  // REQUIRES: mu_ held
  const NvmlLibrary& nvml_;
  std::string path_;
  mutable std::mutex mu_;
  std::vector<MigSlot> created_;
  std::uint64_t generation_ = 0;
  std::map<MigSlot, std::uint64_t> handed_;  // the generation each slot was last handed out in
};

// The resources the device plugin serves for MIG: "nvidia.com/mig-<profile>" for every profile
// without media extensions of every MIG-enabled GPU's family, sorted. Read once at start
// (enabling MIG takes a GPU reset; restart the agent after one).
std::vector<std::string> mig_resources(const NvmlLibrary& nvml);

}  // namespace gapless::agent
