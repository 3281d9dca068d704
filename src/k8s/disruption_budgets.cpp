#include "gapless/k8s/disruption_budgets.h"

#include <algorithm>
#include <climits>

#include "gapless/k8s/json_fields.h"

namespace gapless::k8s {
namespace {

using model::LabelRequirement;
using nlohmann::json;

const json* member(const json& obj, const char* key) {
  if (!obj.is_object()) return nullptr;
  const auto it = obj.find(key);
  return it == obj.end() ? nullptr : &*it;
}

std::string string_member(const json& obj, const char* key) {
  const json* v = member(obj, key);
  return v != nullptr && v->is_string() ? v->get<std::string>() : "";
}

std::optional<LabelRequirement> parse_requirement(const json& e) {
  static const std::pair<const char*, LabelRequirement::Op> kOps[] = {
      {"In", LabelRequirement::Op::kIn},
      {"NotIn", LabelRequirement::Op::kNotIn},
      {"Exists", LabelRequirement::Op::kExists},
      {"DoesNotExist", LabelRequirement::Op::kDoesNotExist}};
  LabelRequirement r;
  r.key = string_member(e, "key");
  const std::string op = string_member(e, "operator");
  const auto it =
      std::find_if(std::begin(kOps), std::end(kOps), [&](const auto& o) { return op == o.first; });
  if (r.key.empty() || it == std::end(kOps)) return std::nullopt;
  r.op = it->second;
  if (const json* values = member(e, "values"); values != nullptr && values->is_array()) {
    for (const json& v : *values) {
      if (!v.is_string()) return std::nullopt;
      r.values.push_back(v.get<std::string>());
    }
  }
  const bool listing = r.op == LabelRequirement::Op::kIn || r.op == LabelRequirement::Op::kNotIn;
  if (listing == r.values.empty()) return std::nullopt;  // as the API server validates
  return r;
}

}  // namespace

std::optional<model::LabelSelector> parse_label_selector(const json& selector) {
  if (!selector.is_object()) return std::nullopt;
  model::LabelSelector out;
  if (const json* labels = member(selector, "matchLabels"); labels != nullptr) {
    if (!labels->is_object()) return std::nullopt;
    for (const auto& [k, v] : labels->items()) {
      if (!v.is_string()) return std::nullopt;
      out.match_labels[k] = v.get<std::string>();
    }
  }
  if (const json* exprs = member(selector, "matchExpressions"); exprs != nullptr) {
    if (!exprs->is_array()) return std::nullopt;
    for (const json& e : *exprs) {
      auto r = parse_requirement(e);
      if (!r) return std::nullopt;
      out.match_expressions.push_back(std::move(*r));
    }
  }
  return out;
}

std::optional<DisruptionBudgets::Budget> DisruptionBudgets::parse(const json& pdb) {
  const json* meta = member(pdb, "metadata");
  Budget b;
  b.ns = meta != nullptr ? string_member(*meta, "namespace") : "";
  b.name = meta != nullptr ? string_member(*meta, "name") : "";
  if (b.ns.empty() || b.name.empty()) return std::nullopt;
  const json* spec = member(pdb, "spec");
  const json* sel = spec != nullptr ? member(*spec, "selector") : nullptr;
  if (sel != nullptr) b.selector = parse_label_selector(*sel);
  // kube-scheduler: "A PDB with a nil or empty selector matches nothing."
  if (b.selector && b.selector->match_labels.empty() && b.selector->match_expressions.empty()) {
    b.selector.reset();
  }
  const json* status = member(pdb, "status");
  const json* allowed = status != nullptr ? member(*status, "disruptionsAllowed") : nullptr;
  const auto n = allowed != nullptr ? as_int64(*allowed) : std::nullopt;
  // Missing (the controller has not computed it yet) reads as 0: no eviction is allowed.
  b.allowed =
      static_cast<std::int32_t>(std::clamp<std::int64_t>(n.value_or(0), INT32_MIN, INT32_MAX));
  if (const json* d = status != nullptr ? member(*status, "disruptedPods") : nullptr;
      d != nullptr && d->is_object()) {
    for (const auto& [pod, when] : d->items()) b.disrupted.insert(pod);
  }
  return b;
}

InformerHandlers DisruptionBudgets::handlers() {
  InformerHandlers h;
  h.on_list = [this](const std::vector<json>& items) { replace(items); };
  h.on_event = [this](const std::string& type, const json& pdb) { apply(type, pdb); };
  return h;
}

void DisruptionBudgets::apply(const std::string& type, const json& pdb) {
  auto b = parse(pdb);
  if (!b) return;
  std::lock_guard lock(mu_);
  const std::string key = b->ns + "/" + b->name;
  if (type == "DELETED") {
    budgets_.erase(key);
  } else if (type == "ADDED" || type == "MODIFIED") {
    budgets_[key] = std::move(*b);
  }
}

void DisruptionBudgets::replace(const std::vector<json>& pdbs) {
  std::unordered_map<std::string, Budget> all;
  for (const json& pdb : pdbs) {
    if (auto b = parse(pdb)) all[b->ns + "/" + b->name] = std::move(*b);
  }
  std::lock_guard lock(mu_);
  budgets_ = std::move(all);
  synced_ = true;
}

void DisruptionBudgets::observe_pod(const model::PodInfo& pod) {
  if (pod.uid.empty()) return;
  std::lock_guard lock(mu_);
  if (auto it = pod_ns_.find(pod.uid); it != pod_ns_.end() && it->second != pod.ns) {
    pods_[it->second].erase(pod.uid);
  }
  pod_ns_[pod.uid] = pod.ns;
  pods_[pod.ns][pod.uid] = Pod{pod.name, pod.labels};
}

void DisruptionBudgets::forget_pod(const std::string& uid) {
  std::lock_guard lock(mu_);
  auto it = pod_ns_.find(uid);
  if (it == pod_ns_.end()) return;
  auto ns = pods_.find(it->second);
  ns->second.erase(uid);
  if (ns->second.empty()) pods_.erase(ns);
  pod_ns_.erase(it);
}

std::vector<model::DisruptionBudget> DisruptionBudgets::resolve() const {
  std::lock_guard lock(mu_);
  std::vector<model::DisruptionBudget> out;
  for (const auto& [key, b] : budgets_) {
    model::DisruptionBudget r{key, {}, b.allowed};
    auto ns = pods_.find(b.ns);
    if (b.selector && ns != pods_.end()) {
      for (const auto& [uid, pod] : ns->second) {
        if (b.disrupted.count(pod.name) == 0 && b.selector->matches(pod.labels)) {
          r.pods.insert(uid);
        }
      }
    }
    out.push_back(std::move(r));
  }
  std::sort(out.begin(), out.end(), [](const auto& x, const auto& y) { return x.name < y.name; });
  return out;
}

}  // namespace gapless::k8s
