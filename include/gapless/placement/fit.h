// Feasibility: can this node take this pod, and if not, why. The reason is a stable sentence
// (no node names, no node-specific numbers) because kube-scheduler groups identical reasons in
// the pod's FailedScheduling event.
#pragma once

#include <string>

#include "gapless/model/node.h"
#include "gapless/model/request.h"

namespace gapless::placement {

enum class FitCode {
  kFits,
  kFullNow,       // could fit once pods leave: FailedNodes (a preemption candidate)
  kUnresolvable,  // can never fit as inventoried: FailedAndUnresolvableNodes
};

struct Fit {
  FitCode code = FitCode::kFits;
  std::string reason;  // empty when kFits
  // A short label for metrics ("insufficient_free_gpus", "model_mismatch", ...).
  std::string label;

  bool fits() const { return code == FitCode::kFits; }
};

Fit check_fit(const model::Node& node, const model::GpuRequest& req);

}  // namespace gapless::placement
