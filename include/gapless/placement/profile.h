// Scoring profiles and the policy that selects between them, as plain structs. The policy layer
// fills these from YAML (policies/*.yaml); tests and benches can build them directly.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "gapless/model/request.h"
#include "gapless/placement/consolidation_rules.h"
#include "gapless/placement/quota.h"
#include "gapless/placement/strategy.h"

namespace gapless::placement {

struct WeightedStrategy {
  const Strategy* strategy = nullptr;  // never null in a validated profile
  double weight = 1.0;                 // > 0
};

// Which pods a profile is meant for. Every non-empty criterion must match; inside a list any
// entry may match. An empty selector matches nothing (it is reached only by name or as default).
struct Selector {
  std::vector<std::string> namespaces;
  std::vector<std::string> priority_classes;
  std::map<std::string, std::string> pod_labels;  // all must be present with these values

  bool empty() const {
    return namespaces.empty() && priority_classes.empty() && pod_labels.empty();
  }
  bool matches(const model::PodInfo& pod) const;
};

struct Profile {
  std::string name;
  // Node level (prioritize): weighted mean of these strategies' score_node.
  std::vector<WeightedStrategy> node;
  // GPU level (which GPUs inside the node): weighted mean of these strategies' score_gpu.
  std::vector<WeightedStrategy> gpu;
  // Weight of the GPU-level score of the pick in the node score (0: nodes ranked by node level
  // only).
  double gpu_weight = 1.0;
  // Weight of the NVLink connectivity of the picked GPU set, in the pick and in the node score.
  double topology_weight = 1.0;
  // Filter keeps only this many passing nodes, the best-scored (0: all). kube-scheduler then runs
  // its score plugins and prioritize over a handful of nodes instead of every feasible one (its
  // per-pod cost grows with the feasible set); the nodes narrowed out are reported unresolvable,
  // so preemption never looks at them (they fit; evicting there would be pointless).
  int keep_best = 0;
  // A pod of this profile asking at least this many whole GPUs that fits no node reserves a node
  // to drain for it (placement/drain.h, Scheduler::wait); 0: its pods never reserve.
  int drain_min_gpus = 0;
  Selector select;
  // Inputs some strategies read (the workload mix, ...). Not from the policy file: the driver
  // sets it on its copy of the profile. Empty by default.
  ScoreContext context;
};

struct Policy {
  std::string source;             // file it came from, or "built-in"
  std::vector<Profile> profiles;  // selection tries them in this order
  std::string default_profile;    // name of the profile used when no selector matches
  std::vector<Quota> quotas;      // namespace limits, checked by filter and reserve
  ConsolidationRules consolidation;  // moving movable pods for waiting ones (off by default)
};

// Picks the profile for a pod: the gapless.io/policy annotation names one explicitly; otherwise
// the first profile whose selector matches; otherwise the default.
// Returns nullptr and sets *error when the annotation names a profile the policy lacks.
const Profile* select_profile(const Policy& policy, const model::PodInfo& pod, std::string* error);

// The policy used when no --policy file is given: one profile "default", policies/default.yaml's
// (gapless at both levels, GPU weight 0, topology weight 1).
Policy builtin_policy();

}  // namespace gapless::placement
