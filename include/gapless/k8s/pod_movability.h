// Whether consolidation may move a pod (model::Movability, docs/consolidation.md "Who may move"),
// decided from the Pod object alone:
//   kNever     pods in kube-system; pods being deleted; pods whose controller (the
//              ownerReference with controller: true) is not a ReplicaSet, StatefulSet or Job,
//              which recreate an evicted pod (DaemonSet pods, bare pods, anything else); pods
//              annotated gapless.io/movable with any value but "true" (an opt-out, e.g.
//              "false": a typo never makes a pod movable);
//   kOptedIn   the others annotated gapless.io/movable: "true";
//   kByPolicy  the rest: movable only below the policy's consolidation.movablePriorityBelow.
// Never throws; a malformed object is kNever.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include "gapless/model/allocation.h"

namespace gapless::k8s {

inline constexpr const char* kMovableAnnotation = "gapless.io/movable";

model::Movability pod_movability(const nlohmann::json& pod);

}  // namespace gapless::k8s
