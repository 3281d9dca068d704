// MIG (Multi-Instance GPU) geometry: which GPU-instance profiles a GPU model offers, how many of
// the 8 memory slices each occupies, and where each may start (docs/mig-profiles.md).
//
// Profiles are keyed by (GPU family, profile name), never by the name alone: "1g.10gb" is the
// 2-slice double-memory profile on an A100-40GB but the 1-slice base profile on an A100-80GB/H100.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace gapless::model {

inline constexpr int kMigMemorySlices = 8;
inline constexpr int kMigComputeSlices = 7;

// One GPU-instance profile of one GPU family, e.g. "3g.40gb" on A100-80GB.
struct MigProfile {
  std::string_view name;          // as in nvidia.com/mig-<name>, e.g. "3g.40gb"
  int compute_slices = 0;         // the "Ng" part
  int memory_slices = 0;          // width of the placement, [start, start + memory_slices)
  std::vector<int> starts;        // allowed start memory slices
  bool media_extensions = false;  // "+me": at most one per GPU
};

// Families with MIG support. kNone: the model has no MIG (T4, V100, L4, ...).
enum class MigFamily { kNone, kA100_40GB, kA100_80GB, kH100_80GB, kH100_94GB, kH100_96GB, kH200 };

// Maps a product string ("NVIDIA-A100-SXM4-40GB", "NVIDIA H100 80GB HBM3", "A100-PCIE-80GB") to its
// MIG family. Unknown or non-MIG products give kNone.
MigFamily mig_family_of(std::string_view product);

// All profiles of a family, largest first. Empty for kNone.
std::span<const MigProfile> mig_profiles(MigFamily family);

// The profile called `name` on `family`, or nullptr if that family has no such profile.
const MigProfile* find_mig_profile(MigFamily family, std::string_view name);

// Every profile name some family in the table offers, sorted, each once ("1g.10gb", ...).
std::vector<std::string_view> known_mig_profile_names();

// Memory-slice mask of an instance placed at `start`: bits [start, start + width).
inline std::uint8_t mig_slice_mask(int start, int width) {
  return static_cast<std::uint8_t>(((1u << width) - 1u) << start);
}

// A GPU instance that exists (static layout) on a GPU.
struct MigInstance {
  std::string profile;
  int start = 0;
};

// The MIG side of one GPU. Disabled: the GPU is used whole or shared. Enabled with instances:
// a static layout; pods get one of those instances. Enabled without instances: reconfigurable;
// Gapless chooses the profile placement and records it for the node side to create.
struct MigLayout {
  bool enabled = false;
  std::vector<MigInstance> instances;

  bool reconfigurable() const { return enabled && instances.empty(); }
};

}  // namespace gapless::model
