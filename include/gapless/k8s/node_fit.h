// Whether a pod's scheduling constraints admit a node, decided as kube-scheduler's NodeAffinity,
// TaintToleration and NodeUnschedulable filters decide it. The extender's bind checks the API
// server's pod against its target node with this (kube_binder.h, docs/extender-flags-and-routes.md
// "What bind checks"), so a client that sends /filter a pod body without its constraints cannot
// make Gapless bind the pod where kube-scheduler never would.
//
// Plain data and pure functions: node_facts.h reads these structs from Pod and Node JSON.
//
// Semantics (core/v1, component-helpers nodeaffinity, TaintToleration):
//   - spec.nodeSelector: every pair equals the node's label.
//   - required node affinity: the terms are ORed, a term's expressions and fields ANDed; a term
//     with neither matches no node, and so does a term with a requirement that is malformed
//     (In/NotIn without values, Gt/Lt without exactly one integer, an unknown operator).
//     Labels: In, NotIn (also true without the label), Exists, DoesNotExist, Gt and Lt (the label
//     and the value both integers). Fields: metadata.name only, In or NotIn with one value.
//   - taints: a NoSchedule or NoExecute taint must be tolerated (PreferNoSchedule never blocks).
//     A toleration with an effect matches only that effect; with a key only that key; Exists
//     matches any value, Equal (or no operator) only the same value; Exists with no key matches
//     every taint. A cordoned node (spec.unschedulable) counts as its
//     node.kubernetes.io/unschedulable:NoSchedule taint.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace gapless::k8s {

struct NodeSelectorRequirement {
  std::string key;
  std::string op;  // "In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"; anything else fails
  std::vector<std::string> values;
};

struct NodeSelectorTerm {
  std::vector<NodeSelectorRequirement> match_expressions;  // on the node's labels
  std::vector<NodeSelectorRequirement> match_fields;       // on metadata.name
};

struct Taint {
  std::string key, value, effect;
};

struct Toleration {
  std::string key;
  std::string op;  // "Equal" (or "": the default), "Exists"; anything else tolerates nothing
  std::string value;
  std::string effect;  // "" matches every effect
};

// What of a pod decides which nodes it may run on, beside resources.
struct PodPlacement {
  std::map<std::string, std::string> node_selector;
  // requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms; nullopt when the pod has
  // no required node affinity (every node passes), an empty list when it has one without terms
  // (no node passes).
  std::optional<std::vector<NodeSelectorTerm>> required_terms;
  std::vector<Toleration> tolerations;
};

// What of a Node the constraints are checked against.
struct NodeFacts {
  std::string name;
  std::map<std::string, std::string> labels;
  std::vector<Taint> taints;
  bool unschedulable = false;  // spec.unschedulable (cordoned)
};

inline constexpr const char* kUnschedulableTaintKey = "node.kubernetes.io/unschedulable";

bool requirement_matches(const NodeSelectorRequirement& r,
                         const std::map<std::string, std::string>& labels);
bool term_matches(const NodeSelectorTerm& term, const NodeFacts& node);
bool tolerates(const Toleration& toleration, const Taint& taint);

// Why `pod` may not run on `node`, as the end of a sentence that starts "pod ns/name " ("has
// nodeSelector k=v, which node n does not match (...)", "does not tolerate taint k=v:NoSchedule
// of node n"); nullopt when it may. The first reason found, in the order nodeSelector, required
// affinity, taints.
std::optional<std::string> node_misfit(const PodPlacement& pod, const NodeFacts& node);

}  // namespace gapless::k8s
