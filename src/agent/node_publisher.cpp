#include "gapless/agent/node_publisher.h"

#include <nlohmann/json.hpp>

#include "gapless/k8s/json_fields.h"

namespace gapless::agent {

using nlohmann::json;

NodePublisher::NodePublisher(k8s::ApiTransport& api, std::string node_name,
                             std::string annotation_key)
    : api_(api), node_name_(std::move(node_name)), key_(std::move(annotation_key)) {}

Result<bool> NodePublisher::publish(const std::string& annotation) {
  if (!published_) {
    auto got = api_.call("GET", path(), "", "application/json");
    if (!got.ok()) return Error{got.error()};
    if (!got->ok()) return Error{"GET node " + node_name_ + ": " + k8s::api_error(*got)};
    const json node = json::parse(got->body, nullptr, false);
    const json* current = k8s::field_path(node, {"metadata", "annotations", key_});
    published_ = current != nullptr && current->is_string() ? current->get<std::string>() : "";
  }
  if (*published_ == annotation) return false;
  const json value = annotation.empty() ? json(nullptr) : json(annotation);  // null deletes
  const json patch = {{"metadata", {{"annotations", {{key_, value}}}}}};
  auto res = api_.call("PATCH", path(), patch.dump(), "application/merge-patch+json");
  if (!res.ok()) return Error{res.error()};
  if (!res->ok()) return Error{"PATCH node " + node_name_ + ": " + k8s::api_error(*res)};
  published_ = annotation;
  return true;
}

}  // namespace gapless::agent
