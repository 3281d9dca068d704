#include "gapless/agent/product_label.h"

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>

#include "gapless/k8s/json_fields.h"
#include "gapless/model/labels.h"

namespace gapless::agent {

using nlohmann::json;

namespace {

std::string string_at(const json& node, const char* section, const char* key) {
  const json* v = k8s::field_path(node, {"metadata", section, key});
  return v != nullptr && v->is_string() ? v->get<std::string>() : std::string();
}

bool claimed_by_nfd(const json& node) {
  const auto managed = k8s::comma_list(string_at(node, "annotations", kNfdFeatureLabels));
  return std::find(managed.begin(), managed.end(), kProductLabel) != managed.end();
}

}  // namespace

std::string product_label_value(const std::vector<GpuState>& gpus) {
  std::map<std::string, int> count;
  for (const GpuState& g : gpus) ++count[g.model];
  const GpuState* best = nullptr;
  for (const GpuState& g : gpus) {  // by index: the first of the most common wins ties
    if (best == nullptr || count[g.model] > count[best->model]) best = &g;
  }
  if (best == nullptr || !model::valid_label_value(best->model)) return "";
  return best->model;
}

ProductLabeler::ProductLabeler(k8s::ApiTransport& api, std::string node_name)
    : api_(api), node_name_(std::move(node_name)) {}

Result<bool> ProductLabeler::publish(const std::string& value) {
  if (value.empty() || decided_ == value) return false;
  auto got = api_.call("GET", path(), "", "application/json");
  if (!got.ok()) return Error{got.error()};
  if (!got->ok()) return Error{"GET node " + node_name_ + ": " + k8s::api_error(*got)};
  const json node = json::parse(got->body, nullptr, false);
  if (!node.is_object()) return Error{"GET node " + node_name_ + ": not a JSON object"};
  const json* labels = k8s::field_path(node, {"metadata", "labels"});
  const bool labelled = k8s::field(labels, kProductLabel) != nullptr;
  const std::string label = string_at(node, "labels", kProductLabel);
  const json* owner = k8s::field_path(node, {"metadata", "annotations", kProductLabelOwner});
  const bool ours = owner != nullptr && owner->is_string() && labelled && *owner == label;
  const bool may_write = (!labelled || ours) && !claimed_by_nfd(node);

  json meta = json::object();
  if (const json* version = k8s::field_path(node, {"metadata", "resourceVersion"})) {
    meta["resourceVersion"] = *version;  // the precondition: nobody wrote in between
  }
  if (may_write && !(ours && label == value)) {
    meta["labels"] = {{kProductLabel, value}};
    meta["annotations"] = {{kProductLabelOwner, value}};
  } else if (!may_write && owner != nullptr) {
    meta["annotations"] = {{kProductLabelOwner, nullptr}};  // someone else's label now
  }
  if (!meta.contains("labels") && !meta.contains("annotations")) {
    decided_ = value;
    return false;
  }
  auto res =
      api_.call("PATCH", path(), json{{"metadata", meta}}.dump(), "application/merge-patch+json");
  if (!res.ok()) return Error{res.error()};
  if (!res->ok()) return Error{"PATCH node " + node_name_ + ": " + k8s::api_error(*res)};
  decided_ = value;
  return true;
}

}  // namespace gapless::agent
