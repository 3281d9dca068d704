// Names of MIG resources as NVIDIA's device plugin advertises them (mixed strategy):
// `nvidia.com/mig-<profile>` with the profile's '+' written as '.', so profile "1g.10gb+me" is
// resource "nvidia.com/mig-1g.10gb.me" (extender-protocol.md §6.1). The model uses profile names.
#pragma once

#include <string>
#include <string_view>

namespace gapless::k8s {

inline constexpr std::string_view kMigResourcePrefix = "nvidia.com/mig-";

// "1g.10gb.me" (the part after nvidia.com/mig-) -> "1g.10gb+me"; other names unchanged.
inline std::string mig_profile_from_resource(std::string_view suffix) {
  std::string out(suffix);
  if (out.ends_with(".me")) out.replace(out.size() - 3, 1, "+");
  return out;
}

// "1g.10gb+me" -> "nvidia.com/mig-1g.10gb.me".
inline std::string mig_resource_name(std::string_view profile) {
  std::string out = std::string(kMigResourcePrefix) + std::string(profile);
  for (char& c : out) c = c == '+' ? '.' : c;
  return out;
}

}  // namespace gapless::k8s
