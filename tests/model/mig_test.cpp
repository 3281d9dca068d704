// MIG geometry: family detection from product strings, the per-family profile tables, the §1.1
// placement table (docs/mig-profiles.md), and the "1g.10gb" name trap.
#include <catch2/catch.hpp>

#include <set>
#include <string>
#include <tuple>

#include "gapless/model/mig.h"

namespace {

using gapless::model::find_mig_profile;
using gapless::model::kMigComputeSlices;
using gapless::model::kMigMemorySlices;
using gapless::model::mig_family_of;
using gapless::model::mig_profiles;
using gapless::model::mig_slice_mask;
using gapless::model::MigFamily;
using gapless::model::MigLayout;
using gapless::model::MigProfile;

const MigFamily kAllFamilies[] = {MigFamily::kA100_40GB, MigFamily::kA100_80GB,
                                  MigFamily::kH100_80GB, MigFamily::kH100_94GB,
                                  MigFamily::kH100_96GB, MigFamily::kH200};

}  // namespace

TEST_CASE("mig_family_of maps product strings to MIG families", "[model][mig]") {
  auto [product, family] = GENERATE(table<const char*, MigFamily>({
      {"A100-SXM4-40GB", MigFamily::kA100_40GB},
      {"NVIDIA-A100-SXM4-40GB", MigFamily::kA100_40GB},
      {"NVIDIA A100-PCIE-40GB", MigFamily::kA100_40GB},
      {"NVIDIA-A100-SXM4-80GB", MigFamily::kA100_80GB},
      {"A100-PCIE-80GB", MigFamily::kA100_80GB},
      {"nvidia-a100-sxm4-80gb", MigFamily::kA100_80GB},
      {"NVIDIA-H100-80GB-HBM3", MigFamily::kH100_80GB},
      {"NVIDIA H100 80GB HBM3", MigFamily::kH100_80GB},
      {"NVIDIA-H100-PCIe", MigFamily::kH100_80GB},
      {"NVIDIA H100 NVL", MigFamily::kH100_94GB},
      {"NVIDIA-H100-SXM5-94GB", MigFamily::kH100_94GB},
      {"GH200 96GB", MigFamily::kH100_96GB},
      {"NVIDIA-GH200-480GB", MigFamily::kH100_96GB},
      {"NVIDIA-GH200-144GB-HBM3e", MigFamily::kNone},  // other profile names, not tabled
      {"NVIDIA H200", MigFamily::kH200},
      {"NVIDIA-H200-NVL", MigFamily::kH200},
      {"NVIDIA-H200-141GB-HBM3e", MigFamily::kH200},
      {"Tesla-T4", MigFamily::kNone},
      {"Tesla-V100-SXM2-16GB", MigFamily::kNone},
      {"NVIDIA-L4", MigFamily::kNone},
      {"NVIDIA-A10", MigFamily::kNone},
      {"", MigFamily::kNone},
  }));
  INFO(product);
  CHECK(mig_family_of(product) == family);
}

TEST_CASE("non-MIG family has no profiles", "[model][mig]") {
  CHECK(mig_profiles(MigFamily::kNone).empty());
  CHECK(find_mig_profile(MigFamily::kNone, "1g.10gb") == nullptr);
}

TEST_CASE("every profile of every family has a valid geometry", "[model][mig]") {
  const MigFamily family = GENERATE(from_range(std::begin(kAllFamilies), std::end(kAllFamilies)));
  const auto profiles = mig_profiles(family);
  REQUIRE(profiles.size() == 7);
  std::set<std::string> names;
  int media = 0;
  int previous_compute = kMigComputeSlices + 1;
  for (const MigProfile& p : profiles) {
    INFO(std::string(p.name));
    CHECK(names.insert(std::string(p.name)).second);  // names unique inside a family
    CHECK(p.compute_slices >= 1);
    CHECK(p.compute_slices <= kMigComputeSlices);
    CHECK(p.memory_slices >= 1);
    CHECK(p.memory_slices <= kMigMemorySlices);
    CHECK(p.compute_slices <= previous_compute);  // largest first
    previous_compute = p.compute_slices;
    REQUIRE_FALSE(p.starts.empty());
    for (int s : p.starts) {
      CHECK(s >= 0);
      CHECK(s + p.memory_slices <= kMigMemorySlices);
      CHECK(s % p.memory_slices == 0);  // placements are aligned to their width
    }
    // The name's "Ng" prefix is the compute slice count.
    CHECK(std::string(p.name).substr(0, 2) == std::to_string(p.compute_slices) + "g");
    CHECK(find_mig_profile(family, p.name) == &p);
    media += p.media_extensions ? 1 : 0;
    CHECK(p.media_extensions == (std::string(p.name).find("+me") != std::string::npos));
  }
  CHECK(media == 1);
}

TEST_CASE("placement table of docs/mig-profiles.md §1.1", "[model][mig]") {
  // (A100-40GB name, A100-80GB name, memory slices, compute slices, starts)
  auto [n40, n80, width, compute, starts] =
      GENERATE(table<const char*, const char*, int, int, std::vector<int>>({
          {"1g.5gb", "1g.10gb", 1, 1, {0, 1, 2, 3, 4, 5, 6}},
          {"1g.5gb+me", "1g.10gb+me", 1, 1, {0, 1, 2, 3, 4, 5, 6}},
          {"1g.10gb", "1g.20gb", 2, 1, {0, 2, 4, 6}},
          {"2g.10gb", "2g.20gb", 2, 2, {0, 2, 4}},
          {"3g.20gb", "3g.40gb", 4, 3, {0, 4}},
          {"4g.20gb", "4g.40gb", 4, 4, {0}},
          {"7g.40gb", "7g.80gb", 8, 7, {0}},
      }));
  for (auto [family, name] :
       {std::tuple{MigFamily::kA100_40GB, n40}, std::tuple{MigFamily::kA100_80GB, n80},
        std::tuple{MigFamily::kH100_80GB, n80}}) {
    INFO(name);
    const MigProfile* p = find_mig_profile(family, name);
    REQUIRE(p != nullptr);
    CHECK(p->memory_slices == width);
    CHECK(p->compute_slices == compute);
    CHECK(p->starts == starts);
  }
}

TEST_CASE("1g.10gb means different profiles on A100-40GB and A100-80GB/H100-80GB", "[model][mig]") {
  const MigProfile* on40 = find_mig_profile(MigFamily::kA100_40GB, "1g.10gb");
  const MigProfile* on80 = find_mig_profile(MigFamily::kA100_80GB, "1g.10gb");
  const MigProfile* onH100 = find_mig_profile(MigFamily::kH100_80GB, "1g.10gb");
  REQUIRE(on40 != nullptr);
  REQUIRE(on80 != nullptr);
  REQUIRE(onH100 != nullptr);
  CHECK(on40->memory_slices == 2);
  CHECK(on40->starts == std::vector<int>{0, 2, 4, 6});
  CHECK(on80->memory_slices == 1);
  CHECK(onH100->memory_slices == 1);
  CHECK(on80->starts.size() == 7);
}

TEST_CASE("profile names are family-specific", "[model][mig]") {
  auto [family, present, absent] = GENERATE(table<MigFamily, const char*, const char*>({
      {MigFamily::kA100_40GB, "7g.40gb", "7g.80gb"},
      {MigFamily::kA100_40GB, "1g.5gb+me", "1g.10gb+me"},
      {MigFamily::kA100_80GB, "7g.80gb", "7g.40gb"},
      {MigFamily::kA100_80GB, "1g.20gb", "1g.5gb"},
      {MigFamily::kH100_80GB, "3g.40gb", "3g.47gb"},
      {MigFamily::kH100_94GB, "3g.47gb", "3g.48gb"},
      {MigFamily::kH100_94GB, "7g.94gb", "7g.80gb"},
      {MigFamily::kH100_96GB, "4g.48gb", "4g.47gb"},
      {MigFamily::kH100_96GB, "7g.96gb", "7g.94gb"},
      {MigFamily::kH200, "7g.141gb", "7g.80gb"},
      {MigFamily::kH200, "1g.18gb+me", "1g.12gb+me"},
  }));
  INFO(present << " / " << absent);
  CHECK(find_mig_profile(family, present) != nullptr);
  CHECK(find_mig_profile(family, absent) == nullptr);
  CHECK(find_mig_profile(family, "") == nullptr);
  CHECK(find_mig_profile(family, "mig-1g.10gb") == nullptr);  // resource prefix is not a name
}

TEST_CASE("mig_slice_mask covers [start, start + width)", "[model][mig]") {
  CHECK(mig_slice_mask(0, 8) == 0xFF);
  CHECK(mig_slice_mask(0, 1) == 0x01);
  CHECK(mig_slice_mask(6, 1) == 0x40);
  CHECK(mig_slice_mask(6, 2) == 0xC0);
  CHECK(mig_slice_mask(4, 4) == 0xF0);
  CHECK(mig_slice_mask(2, 2) == 0x0C);
  // Every allowed placement stays inside the 8-bit mask and has `width` bits set.
  for (MigFamily f : kAllFamilies) {
    for (const MigProfile& p : mig_profiles(f)) {
      for (int s : p.starts) {
        const unsigned m = mig_slice_mask(s, p.memory_slices);
        CHECK(__builtin_popcount(m) == p.memory_slices);
        CHECK(m <= 0xFFu);
      }
    }
  }
}

TEST_CASE("MigLayout: enabled without instances is reconfigurable", "[model][mig]") {
  MigLayout off;
  CHECK_FALSE(off.reconfigurable());
  MigLayout reconf{true, {}};
  CHECK(reconf.reconfigurable());
  MigLayout fixed{true, {{"3g.40gb", 0}}};
  CHECK_FALSE(fixed.reconfigurable());
}
