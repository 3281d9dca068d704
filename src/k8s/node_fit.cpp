// kube-scheduler's node selector, required node affinity and taint rules (node_fit.h).
#include "gapless/k8s/node_fit.h"

#include <algorithm>
#include <charconv>
#include <cstdint>

#include "gapless/model/labels.h"

namespace gapless::k8s {

namespace {

// A base-10 int64 as Go's strconv.ParseInt reads it (an optional sign, digits, nothing else).
std::optional<std::int64_t> parse_int(std::string_view text) {
  if (!text.empty() && text.front() == '+') text.remove_prefix(1);
  std::int64_t out = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, out);
  if (text.empty() || ec != std::errc() || ptr != end) return std::nullopt;
  return out;
}

// Gt / Lt: one integer value, and a label that is an integer too.
bool compares(const NodeSelectorRequirement& r, const std::map<std::string, std::string>& labels) {
  if (r.values.size() != 1) return false;
  const auto bound = parse_int(r.values.front());
  const auto it = labels.find(r.key);
  if (!bound || it == labels.end()) return false;
  const auto have = parse_int(it->second);
  if (!have) return false;
  return r.op == "Gt" ? *have > *bound : *have < *bound;
}

// matchFields: the node's only selectable field is metadata.name; In and NotIn with one value.
bool field_matches(const NodeSelectorRequirement& r, const NodeFacts& node) {
  if (r.values.size() != 1) return false;
  const std::string have = r.key == "metadata.name" ? node.name : "";
  if (r.op == "In") return have == r.values.front();
  if (r.op == "NotIn") return have != r.values.front();
  return false;
}

std::string describe(const Taint& t) {
  return t.key + (t.value.empty() ? "" : "=" + t.value) + ":" + t.effect;
}

bool blocks_scheduling(const Taint& t) {
  return t.effect == "NoSchedule" || t.effect == "NoExecute";
}

}  // namespace

bool requirement_matches(const NodeSelectorRequirement& r,
                         const std::map<std::string, std::string>& labels) {
  if (r.op == "Gt" || r.op == "Lt") return compares(r, labels);
  using Op = model::LabelRequirement::Op;
  const std::optional<Op> op = r.op == "In"             ? Op::kIn
                               : r.op == "NotIn"        ? Op::kNotIn
                               : r.op == "Exists"       ? Op::kExists
                               : r.op == "DoesNotExist" ? Op::kDoesNotExist
                                                        : std::optional<Op>();
  if (!op) return false;  // unknown operator: the term is malformed and matches nothing
  // Node affinity's validity rule: In and NotIn need values, Exists and DoesNotExist take none.
  const bool takes_values = *op == Op::kIn || *op == Op::kNotIn;
  if (r.values.empty() == takes_values) return false;
  // The four set operators mean what they mean in a label selector (model/labels.h).
  const model::LabelSelector one{{}, {{r.key, *op, r.values}}};
  return one.matches(labels);
}

bool term_matches(const NodeSelectorTerm& term, const NodeFacts& node) {
  if (term.match_expressions.empty() && term.match_fields.empty()) return false;
  return std::all_of(term.match_expressions.begin(), term.match_expressions.end(),
                     [&](const auto& r) { return requirement_matches(r, node.labels); }) &&
         std::all_of(term.match_fields.begin(), term.match_fields.end(),
                     [&](const auto& r) { return field_matches(r, node); });
}

bool tolerates(const Toleration& toleration, const Taint& taint) {
  if (!toleration.effect.empty() && toleration.effect != taint.effect) return false;
  if (!toleration.key.empty() && toleration.key != taint.key) return false;
  if (toleration.op == "Exists") return true;
  if (toleration.op.empty() || toleration.op == "Equal") return toleration.value == taint.value;
  return false;
}

std::optional<std::string> node_misfit(const PodPlacement& pod, const NodeFacts& node) {
  for (const auto& [key, value] : pod.node_selector) {
    auto it = node.labels.find(key);
    if (it == node.labels.end() || it->second != value) {
      return "has nodeSelector " + key + "=" + value + ", which node " + node.name +
             " does not match (" +
             (it == node.labels.end() ? "it has no label " + key : "its label is " + it->second) +
             ")";
    }
  }
  if (pod.required_terms &&
      std::none_of(pod.required_terms->begin(), pod.required_terms->end(),
                   [&](const NodeSelectorTerm& t) { return term_matches(t, node); })) {
    return "has a required node affinity that node " + node.name + " does not match";
  }
  std::vector<Taint> taints = node.taints;
  if (node.unschedulable) taints.push_back(Taint{kUnschedulableTaintKey, "", "NoSchedule"});
  for (const Taint& taint : taints) {
    if (!blocks_scheduling(taint)) continue;
    if (std::none_of(pod.tolerations.begin(), pod.tolerations.end(),
                     [&](const Toleration& t) { return tolerates(t, taint); })) {
      return "does not tolerate taint " + describe(taint) + " of node " + node.name;
    }
  }
  return std::nullopt;
}

}  // namespace gapless::k8s
