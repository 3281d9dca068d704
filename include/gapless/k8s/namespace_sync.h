// Namespaces' labels for the engine: handlers for an informer on /api/v1/namespaces that hand
// each namespace's metadata.labels on as plain data (placement::Scheduler::set_namespaces and
// friends), so quotas can select namespaces by label. Nothing else of a Namespace is read.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <unordered_map>

#include "gapless/k8s/informer.h"
#include "gapless/model/labels.h"

namespace gapless::k8s {

struct NamespaceHooks {
  // A full list: every namespace with its labels (those absent were deleted).
  std::function<void(std::unordered_map<std::string, model::Labels> all)> replace;
  std::function<void(const std::string& name, model::Labels labels)> set;  // added or changed
  std::function<void(const std::string& name)> erase;                      // deleted
};

// metadata.labels of any object; entries whose value is not a string are skipped.
model::Labels object_labels(const nlohmann::json& object);

// Objects without metadata.name are skipped (on_error is left for the caller to set).
InformerHandlers namespace_handlers(NamespaceHooks hooks);

}  // namespace gapless::k8s
