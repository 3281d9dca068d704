#include "gapless/k8s/pod_movability.h"

#include <array>
#include <nlohmann/json.hpp>
#include <string_view>

#include "gapless/k8s/json_fields.h"

namespace gapless::k8s {

namespace {

using nlohmann::json;

// Controllers that create a new pod when one of theirs is evicted (apps/v1, batch/v1).
bool recreates_pods(const json& owner) {
  static constexpr std::array<std::string_view, 3> kKinds = {"ReplicaSet", "StatefulSet", "Job"};
  const std::string kind = string_field(owner, "kind");
  const std::string api = string_field(owner, "apiVersion");
  const bool group_ok = (kind == "Job") ? api.rfind("batch/", 0) == 0 : api.rfind("apps/", 0) == 0;
  for (std::string_view k : kKinds) {
    if (kind == k) return group_ok;
  }
  return false;
}

// The owner that controls the pod (at most one has controller: true), or null.
const json* controller_of(const json& meta) {
  const json* owners = field(meta, "ownerReferences");
  if (owners == nullptr || !owners->is_array()) return nullptr;
  for (const json& o : *owners) {
    const json* controller = field(o, "controller");
    if (controller != nullptr && controller->is_boolean() && controller->get<bool>()) return &o;
  }
  return nullptr;
}

}  // namespace

model::Movability pod_movability(const json& pod) {
  const json* meta = field(pod, "metadata");
  if (meta == nullptr || !meta->is_object()) return model::Movability::kNever;
  if (string_field(*meta, "namespace") == "kube-system") return model::Movability::kNever;
  if (field(*meta, "deletionTimestamp") != nullptr) return model::Movability::kNever;
  const json* controller = controller_of(*meta);
  if (controller == nullptr || !recreates_pods(*controller)) return model::Movability::kNever;
  const json* annotations = field(*meta, "annotations");
  const json* mark = annotations != nullptr ? field(*annotations, kMovableAnnotation) : nullptr;
  if (mark == nullptr) return model::Movability::kByPolicy;
  return mark->is_string() && mark->get<std::string>() == "true" ? model::Movability::kOptedIn
                                                                 : model::Movability::kNever;
}

}  // namespace gapless::k8s
