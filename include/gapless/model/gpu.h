// One physical GPU and what is currently allocated on it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "gapless/model/ascii.h"
#include "gapless/model/mig.h"

namespace gapless::model {

inline constexpr int kFullComputeMilli = 1000;

// GPU models match case-insensitively (a pod's gapless.io/gpu-model, a quota's models, the
// node's product label): the one spelling that maps and sets keyed by model use.
inline std::string model_key(std::string_view model) {
  return ascii_lower(model);
}

// What pods hold on one GPU right now. Derived from the cluster's allocations: Cluster keeps it
// in step with every commit and release, so placement never has to walk the allocation list.
struct GpuUsage {
  bool whole = false;                   // held whole by one pod
  int shared_pods = 0;                  // pods holding a share (gapless.io/gpu-memory / -compute)
  std::int64_t memory_used_mib = 0;     // sum of shares' vRAM
  int compute_used_milli = 0;           // sum of shares' compute
  std::int64_t gpushare_used = 0;       // aliyun.com/gpu-mem units in use
  std::uint8_t mig_slices_used = 0;     // memory-slice mask of MIG instances in use
  int mig_compute_used = 0;             // compute slices of MIG instances in use (at most 7)
  int mig_media_used = 0;               // "+me" instances in use (at most 1)
  std::vector<bool> mig_instance_used;  // static layouts: per MigLayout::instances entry

  bool idle() const {
    return !whole && shared_pods == 0 && gpushare_used == 0 && mig_slices_used == 0;
  }
  bool operator==(const GpuUsage&) const = default;
};

struct Gpu {
  int index = 0;
  std::string uuid;             // may be empty when the inventory does not say
  std::string model;            // product, e.g. "NVIDIA-H100-80GB-HBM3"
  std::int64_t memory_mib = 0;  // 0 when unknown (gpushare-only inventory)
  int numa = -1;                // -1 when unknown
  bool healthy = true;
  MigLayout mig;
  MigFamily mig_family = MigFamily::kNone;
  std::int64_t gpushare_capacity = 0;  // aliyun.com/gpu-mem units on this GPU (gpushare nodes)

  // Containers ("ns/pod/container") the node agent saw really using this GPU that no allocation
  // record charges for it (drift: a swap, another scheduler's pod, a bypassed plugin). Such a
  // GPU is fenced: never offered, whatever the model thinks is free on it, until they end.
  std::vector<std::string> in_use_by;

  GpuUsage used;

  // Whether placement may offer this GPU at all: healthy and not fenced by drift.
  bool usable() const { return healthy && in_use_by.empty(); }

  std::int64_t memory_free_mib() const { return memory_mib - used.memory_used_mib; }
  int compute_free_milli() const { return kFullComputeMilli - used.compute_used_milli; }
};

}  // namespace gapless::model
