// A PodDisruptionBudget as the engine sees it: plain data, its selector already resolved by the
// driver (k8s::DisruptionBudgets) into the pods it covers.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_set>

namespace gapless::model {

struct DisruptionBudget {
  std::string name;  // "namespace/name", for logs and tests
  // UIDs of the pods it covers, leaving out those it already counts as disrupted
  // (status.disruptedPods): kube-scheduler skips those too.
  std::unordered_set<std::string> pods;
  std::int32_t allowed = 0;  // status.disruptionsAllowed: more evictions it allows now
};

}  // namespace gapless::model
