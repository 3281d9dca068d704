// Policy YAML (policy::parse_policy). Nothing yaml-cpp throws may escape; a policy that parses
// must be usable: a default that names a profile, strategies with positive finite weights,
// quotas with a name, namespaces and at least one limit, none negative.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_util.h"
#include "gapless/placement/profile.h"
#include "gapless/policy/loader.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using gapless::fuzz::check;
  const std::string text(gapless::fuzz::as_text(data, size));
  auto policy = gapless::policy::parse_policy(text, "fuzz.yaml");
  if (!policy) {
    check(policy.error().starts_with("fuzz.yaml:"), "a policy error without its location",
          policy.error());
    return 0;
  }
  check(!policy->profiles.empty(), "a policy without profiles");
  for (const auto& p : policy->profiles) {
    check(!p.name.empty() && !p.node.empty() && !p.gpu.empty(), "an incomplete profile", p.name);
    for (const auto* level : {&p.node, &p.gpu}) {
      for (const auto& ws : *level) {
        check(ws.strategy != nullptr && std::isfinite(ws.weight) && ws.weight > 0,
              "a strategy without a positive weight", p.name);
      }
    }
    check(std::isfinite(p.gpu_weight) && p.gpu_weight >= 0 && std::isfinite(p.topology_weight) &&
              p.topology_weight >= 0,
          "a negative or infinite weight", p.name);
  }
  gapless::model::PodInfo pod;
  pod.ns = "inference";
  pod.priority_class = "serving";
  pod.labels = {{"tier", "online"}};
  std::string error;
  check(gapless::placement::select_profile(*policy, pod, &error) != nullptr,
        "a parsed policy selects no profile for a pod without an annotation", error);
  for (const auto& q : policy->quotas) {
    bool any = q.whole_gpus_percent.has_value() || !q.limits.empty();
    for (const auto& l : q.limits.max) check(!l || *l >= 0, "a negative limit", q.name);
    for (const auto& [model, limits] : q.per_model) {
      check(!model.empty() && !limits.empty(), "a per-model quota without a model or limit",
            q.name);
      any = true;
      for (const auto& l : limits.max) check(!l || *l >= 0, "a negative limit", q.name);
    }
    check(!q.name.empty() && !q.namespaces.empty() && any, "an incomplete quota", q.name);
    check(!q.whole_gpus_percent || (*q.whole_gpus_percent >= 0 && *q.whole_gpus_percent <= 100),
          "a percentage outside 0..100", q.name);
  }
  return 0;
}
