#include "gapless/placement/profile.h"

#include <algorithm>

namespace gapless::placement {

bool Selector::matches(const model::PodInfo& pod) const {
  if (empty()) return false;
  auto in = [](const std::vector<std::string>& list, const std::string& v) {
    return list.empty() || std::find(list.begin(), list.end(), v) != list.end();
  };
  if (!in(namespaces, pod.ns) || !in(priority_classes, pod.priority_class)) return false;
  for (const auto& [key, value] : pod_labels) {
    auto it = pod.labels.find(key);
    if (it == pod.labels.end() || it->second != value) return false;
  }
  return true;
}

const Profile* select_profile(const Policy& policy, const model::PodInfo& pod, std::string* error) {
  auto by_name = [&](const std::string& name) -> const Profile* {
    for (const Profile& p : policy.profiles) {
      if (p.name == name) return &p;
    }
    return nullptr;
  };
  if (!pod.policy.empty()) {
    const Profile* p = by_name(pod.policy);
    if (p == nullptr && error != nullptr) {
      *error = "gapless.io/policy names profile \"" + pod.policy + "\", which the loaded policy (" +
               policy.source + ") does not define";
    }
    return p;
  }
  for (const Profile& p : policy.profiles) {
    if (p.select.matches(pod)) return &p;
  }
  const Profile* p = by_name(policy.default_profile);
  if (p == nullptr && error != nullptr) *error = "policy has no default profile";
  return p;
}

Policy builtin_policy() {
  Profile p;
  p.name = "default";
  p.node = {{find_strategy("gapless"), 1.0}};
  p.gpu = {{find_strategy("gapless"), 1.0}};
  p.gpu_weight = 0;  // as policies/default.yaml's default profile
  p.keep_best = 8;
  p.drain_min_gpus = 2;
  return Policy{"built-in", {p}, "default", {}, {}};
}

}  // namespace gapless::placement
