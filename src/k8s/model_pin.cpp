#include "gapless/k8s/model_pin.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "gapless/k8s/json_fields.h"
#include "gapless/model/gpu.h"

namespace gapless::k8s {

using nlohmann::json;

namespace {

constexpr std::string_view kRequired = "requiredDuringSchedulingIgnoredDuringExecution";

json pin_expression(std::string_view key, const std::vector<std::string>& values) {
  return json{{"key", key}, {"operator", "In"}, {"values", values}};
}

// Whether `expr` is exactly the pin: key, In, and the same values in any order.
bool is_pin(const json& expr, std::string_view key, const std::vector<std::string>& values) {
  if (!expr.is_object() || string_field(expr, "key") != key ||
      string_field(expr, "operator") != "In") {
    return false;
  }
  const json* have = field(expr, "values");
  if (have == nullptr || !have->is_array()) return false;
  std::set<std::string> got;
  for (const json& v : *have) {
    if (!v.is_string()) return false;
    got.insert(v.get<std::string>());
  }
  return got == std::set<std::string>(values.begin(), values.end());
}

}  // namespace

ModelPin resolve_model_pin(const std::vector<std::string>& models,
                           const std::set<std::string>& label_values,
                           const std::set<std::string>& known_models) {
  ModelPin out;
  std::set<std::string> values;
  for (const std::string& m : models) {
    bool matched = false;
    for (const std::string& v : label_values) {
      if (!model::ascii_iequals(m, v)) continue;
      values.insert(v);
      matched = true;
    }
    if (matched) continue;
    out.unmatched.push_back(m);
    if (known_models.contains(model::model_key(m))) out.pinnable = false;
  }
  out.values.assign(values.begin(), values.end());
  return out;
}

json model_pin_patch(const json& pod, const std::vector<std::string>& values,
                     std::string_view key) {
  json ops = json::array();
  if (values.empty() || !pod.is_object()) return ops;
  const json expr = pin_expression(key, values);
  const json term = {{"matchExpressions", json::array({expr})}};
  const json required = {{"nodeSelectorTerms", json::array({term})}};
  const json* spec = field(pod, "spec");
  const json* affinity = field(spec, "affinity");
  const json* node_affinity = field(affinity, "nodeAffinity");
  const json* req = field(node_affinity, kRequired);
  // A level of the wrong type: the API server refuses such a pod; a patch through it would fail.
  for (const json* level : {spec, affinity, node_affinity, req}) {
    if (level != nullptr && !level->is_object()) return ops;
  }
  if (spec == nullptr) return ops;
  auto add = [&ops](std::string path, json value) {
    ops.push_back({{"op", "add"}, {"path", std::move(path)}, {"value", std::move(value)}});
  };
  if (affinity == nullptr) {
    add("/spec/affinity", {{"nodeAffinity", {{kRequired, required}}}});
  } else if (node_affinity == nullptr) {
    add("/spec/affinity/nodeAffinity", {{kRequired, required}});
  } else if (req == nullptr) {
    add("/spec/affinity/nodeAffinity/" + std::string(kRequired), required);
  } else {
    const json* terms = field(req, "nodeSelectorTerms");
    if (terms == nullptr || !terms->is_array()) return ops;  // the API server refuses such a pod
    const std::string base =
        "/spec/affinity/nodeAffinity/" + std::string(kRequired) + "/nodeSelectorTerms/";
    for (std::size_t i = 0; i < terms->size(); ++i) {
      const json& t = (*terms)[i];
      if (!t.is_object()) continue;
      const json* exprs = field(t, "matchExpressions");
      const std::string path = base + std::to_string(i) + "/matchExpressions";
      if (exprs == nullptr || !exprs->is_array()) {
        add(path, json::array({expr}));
      } else if (std::none_of(exprs->begin(), exprs->end(),
                              [&](const json& e) { return is_pin(e, key, values); })) {
        add(path + "/-", expr);
      }
    }
  }
  return ops;
}

}  // namespace gapless::k8s
