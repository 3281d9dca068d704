// Pod and Node JSON -> node_fit.h's data; the informer-fed store of nodes (node_facts.h).
#include "gapless/k8s/node_facts.h"

#include <nlohmann/json.hpp>
#include <utility>

#include "gapless/k8s/json_fields.h"

namespace gapless::k8s {

using nlohmann::json;

namespace {

std::string text(const json& value) {
  return value.is_string() ? value.get<std::string>() : std::string();
}

std::vector<std::string> texts(const json* values) {
  std::vector<std::string> out;
  if (values == nullptr || !values->is_array()) return out;
  for (const json& v : *values) out.push_back(text(v));
  return out;
}

// Every entry, a non-string value as "" (a selector Gapless cannot read still constrains).
std::map<std::string, std::string> all_strings(const json* obj) {
  std::map<std::string, std::string> out;
  if (obj == nullptr || !obj->is_object()) return out;
  for (const auto& [key, value] : obj->items()) out.emplace(key, text(value));
  return out;
}

std::vector<NodeSelectorRequirement> requirements(const json* list) {
  std::vector<NodeSelectorRequirement> out;
  if (list == nullptr || !list->is_array()) return out;
  for (const json& r : *list) {
    if (!r.is_object()) {
      out.push_back({});  // no operator: matches nothing
      continue;
    }
    out.push_back({string_field(r, "key"), string_field(r, "operator"), texts(field(r, "values"))});
  }
  return out;
}

std::optional<std::vector<NodeSelectorTerm>> required_terms(const json& spec) {
  const json* required = field_path(
      spec, {"affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution"});
  if (required == nullptr) return std::nullopt;
  std::vector<NodeSelectorTerm> terms;
  const json* list = field(*required, "nodeSelectorTerms");
  if (list == nullptr || !list->is_array()) return terms;
  for (const json& t : *list) {
    if (!t.is_object()) {
      terms.push_back({});  // empty: matches nothing
      continue;
    }
    terms.push_back(
        {requirements(field(t, "matchExpressions")), requirements(field(t, "matchFields"))});
  }
  return terms;
}

std::vector<Toleration> tolerations(const json& spec) {
  std::vector<Toleration> out;
  const json* list = field(spec, "tolerations");
  if (list == nullptr || !list->is_array()) return out;
  for (const json& t : *list) {
    if (!t.is_object()) continue;  // tolerates nothing: leaving it out is the same
    out.push_back({string_field(t, "key"), string_field(t, "operator"), string_field(t, "value"),
                   string_field(t, "effect")});
  }
  return out;
}

}  // namespace

PodPlacement read_pod_placement(const json& pod) {
  PodPlacement out;
  const json* spec = field(pod, "spec");
  if (spec == nullptr || !spec->is_object()) return out;
  out.node_selector = all_strings(field(*spec, "nodeSelector"));
  out.required_terms = required_terms(*spec);
  out.tolerations = tolerations(*spec);
  return out;
}

NodeFacts read_node_facts(const json& node) {
  NodeFacts out;
  if (const json* meta = field(node, "metadata"); meta != nullptr && meta->is_object()) {
    out.name = string_field(*meta, "name");
    out.labels = all_strings(field(*meta, "labels"));
  }
  const json* spec = field(node, "spec");
  if (spec == nullptr || !spec->is_object()) return out;
  const json* unschedulable = field(*spec, "unschedulable");
  out.unschedulable =
      unschedulable != nullptr && unschedulable->is_boolean() && unschedulable->get<bool>();
  if (const json* taints = field(*spec, "taints"); taints != nullptr && taints->is_array()) {
    for (const json& t : *taints) {
      // The API server serves only valid taints: objects with a key and an effect.
      if (t.is_object()) {
        out.taints.push_back(
            {string_field(t, "key"), string_field(t, "value"), string_field(t, "effect")});
      }
    }
  }
  return out;
}

InformerHandlers NodeFactsStore::feed(InformerHandlers inner) {
  InformerHandlers out = inner;
  out.on_list = [this, model = inner.on_list](const std::vector<json>& items) {
    if (model) model(items);
    replace(items);
  };
  out.on_event = [this, model = inner.on_event](const std::string& type, const json& node) {
    if (model) model(type, node);
    apply(type, node);
  };
  return out;
}

std::optional<NodeFacts> NodeFactsStore::find(const std::string& name) const {
  std::lock_guard lock(mu_);
  auto it = nodes_.find(name);
  if (it == nodes_.end()) return std::nullopt;
  return it->second;
}

std::set<std::string> NodeFactsStore::label_values(const std::string& key) const {
  std::set<std::string> out;
  std::lock_guard lock(mu_);
  for (const auto& [name, facts] : nodes_) {
    if (auto it = facts.labels.find(key); it != facts.labels.end()) out.insert(it->second);
  }
  return out;
}

void NodeFactsStore::replace(const std::vector<json>& nodes) {
  std::unordered_map<std::string, NodeFacts> fresh;
  for (const json& n : nodes) {
    NodeFacts facts = read_node_facts(n);
    if (!facts.name.empty()) fresh.insert_or_assign(facts.name, std::move(facts));
  }
  std::lock_guard lock(mu_);
  nodes_ = std::move(fresh);
}

void NodeFactsStore::apply(const std::string& type, const json& node) {
  NodeFacts facts = read_node_facts(node);
  if (facts.name.empty()) return;
  std::lock_guard lock(mu_);
  if (type == "DELETED") {
    nodes_.erase(facts.name);
  } else {
    nodes_.insert_or_assign(facts.name, std::move(facts));
  }
}

}  // namespace gapless::k8s
