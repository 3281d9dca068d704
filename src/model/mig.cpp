#include "gapless/model/mig.h"

#include <algorithm>
#include <array>
#include <string>

#include "gapless/model/ascii.h"

namespace gapless::model {
namespace {

// One row per profile slot of the §1.1 placement table; the names differ per family.
struct Slot {
  int compute;
  int memory_slices;
  std::vector<int> starts;
  bool me;
};
const std::array<Slot, 7> kSlots = {{
    {7, 8, {0}, false},                    // 7g
    {4, 4, {0}, false},                    // 4g
    {3, 4, {0, 4}, false},                 // 3g: 4 memory slices for 3 compute slices
    {2, 2, {0, 2, 4}, false},              // 2g
    {1, 2, {0, 2, 4, 6}, false},           // 1g double memory
    {1, 1, {0, 1, 2, 3, 4, 5, 6}, false},  // 1g base
    {1, 1, {0, 1, 2, 3, 4, 5, 6}, true},   // 1g+me
}};

std::vector<MigProfile> make_family(std::array<std::string_view, 7> names) {
  std::vector<MigProfile> out;
  for (std::size_t i = 0; i < kSlots.size(); ++i) {
    out.push_back(
        {names[i], kSlots[i].compute, kSlots[i].memory_slices, kSlots[i].starts, kSlots[i].me});
  }
  return out;
}

// Names per family, in slot order: 7g, 4g, 3g, 2g, 1g double, 1g, 1g+me.
const std::vector<MigProfile>& family_table(MigFamily f) {
  static const std::vector<MigProfile> kEmpty;
  static const std::vector<MigProfile> a100_40 =
      make_family({"7g.40gb", "4g.20gb", "3g.20gb", "2g.10gb", "1g.10gb", "1g.5gb", "1g.5gb+me"});
  static const std::vector<MigProfile> a100_80 =
      make_family({"7g.80gb", "4g.40gb", "3g.40gb", "2g.20gb", "1g.20gb", "1g.10gb", "1g.10gb+me"});
  static const std::vector<MigProfile> h100_94 =
      make_family({"7g.94gb", "4g.47gb", "3g.47gb", "2g.24gb", "1g.24gb", "1g.12gb", "1g.12gb+me"});
  static const std::vector<MigProfile> h100_96 =
      make_family({"7g.96gb", "4g.48gb", "3g.48gb", "2g.24gb", "1g.24gb", "1g.12gb", "1g.12gb+me"});
  static const std::vector<MigProfile> h200 = make_family(
      {"7g.141gb", "4g.71gb", "3g.71gb", "2g.35gb", "1g.35gb", "1g.18gb", "1g.18gb+me"});
  switch (f) {
    case MigFamily::kA100_40GB:
      return a100_40;
    case MigFamily::kA100_80GB:
    case MigFamily::kH100_80GB:
      return a100_80;  // H100-80GB uses the A100-80GB names
    case MigFamily::kH100_94GB:
      return h100_94;
    case MigFamily::kH100_96GB:
      return h100_96;
    case MigFamily::kH200:
      return h200;
    case MigFamily::kNone:
      break;
  }
  return kEmpty;
}

}  // namespace

MigFamily mig_family_of(std::string_view product) {
  const std::string p = ascii_lower(product);
  auto has = [&](std::string_view w) { return p.find(w) != std::string::npos; };
  // GH200 contains "H200" but is an H100 (96GB) superchip; test it first. The 144GB HBM3e GH200
  // has profile names (7g.144gb, ...) that are not in the table: no family rather than wrong names.
  if (has("gh200")) return has("144gb") ? MigFamily::kNone : MigFamily::kH100_96GB;
  if (has("h200")) return MigFamily::kH200;
  if (has("h100")) {
    if (has("96gb") || has("gh200")) return MigFamily::kH100_96GB;
    if (has("94gb") || has("nvl")) return MigFamily::kH100_94GB;
    return MigFamily::kH100_80GB;
  }
  if (has("a100")) return has("80gb") ? MigFamily::kA100_80GB : MigFamily::kA100_40GB;
  return MigFamily::kNone;
}

std::span<const MigProfile> mig_profiles(MigFamily family) {
  return family_table(family);
}

std::vector<std::string_view> known_mig_profile_names() {
  std::vector<std::string_view> names;
  for (MigFamily f : {MigFamily::kA100_40GB, MigFamily::kA100_80GB, MigFamily::kH100_94GB,
                      MigFamily::kH100_96GB, MigFamily::kH200}) {
    for (const MigProfile& p : family_table(f)) names.push_back(p.name);
  }
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

const MigProfile* find_mig_profile(MigFamily family, std::string_view name) {
  for (const MigProfile& p : family_table(family)) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

}  // namespace gapless::model
