// Feasibility: can this node take this pod, and if not, why. The reason is a stable sentence
// (no node names, no node-specific numbers) because kube-scheduler groups identical reasons in
// the pod's FailedScheduling event.
#pragma once

#include <string>
#include <string_view>

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

// Why a node does not fit. The reason's text depends only on the request, never on the node,
// so filter renders each reason once per call instead of once per rejected node.
enum class FitReason {
  kNone,
  kNoGpus,
  kFenced,
  kModelMismatch,
  kInsufficientCapacity,
  kNoNvlinkSet,
  kInsufficientFree,
  kNoFreeNvlinkSet,
  kMigProfileAbsent,
  kInsufficientFreeMig,
  kInsufficientCpu,     // only for nodes and requests that carry host resources (the bench)
  kInsufficientMemory,  // likewise
};

struct QuickFit {
  FitCode code = FitCode::kFits;
  FitReason why = FitReason::kNone;
};

// The feasibility verdict without its text (the filter hot path).
QuickFit quick_fit(const model::Node& node, const model::GpuRequest& req);
// The user-facing sentence for a reason, and its metric label.
std::string describe(FitReason why, const model::GpuRequest& req);
std::string_view label(FitReason why);

// quick_fit + describe + label.
Fit check_fit(const model::Node& node, const model::GpuRequest& req);

}  // namespace gapless::placement
