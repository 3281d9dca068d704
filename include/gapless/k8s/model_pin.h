// gapless.io/gpu-models -> the equivalent required node affinity on nvidia.com/gpu.product, as a
// JSONPatch (RFC 6902) the admission webhook returns (docs/admission-webhook.md). Pure functions
// of the pod and the label values nodes carry, so the trace bench can apply what the webhook
// would.
//
// Why: kube-scheduler samples nodes (percentageOfNodesToScore) before it asks the extender; a
// pod whose models only the extender reads is sampled among every node. With the affinity,
// kube-scheduler's own NodeAffinity filter keeps the sample to nodes of those models.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace gapless::k8s {

// The label GPU Feature Discovery (and the Gapless agent where GFD does not run) puts on nodes.
inline constexpr std::string_view kGpuProductLabel = "nvidia.com/gpu.product";

// The pod's models mapped to the exact label values nodes carry.
struct ModelPin {
  // Every label value equal (ASCII case-insensitively) to one of the pod's models, sorted.
  std::vector<std::string> values;
  // The pod's models that no value matched, in the pod's order.
  std::vector<std::string> unmatched;
  // Whether the pod may be pinned to `values`: false when an unmatched name is a model GPUs in
  // the cluster have (known from the gpu-topology annotation on nodes without the label), as a
  // pin would keep the pod off those nodes. A name no GPU has does not stop the pin: no node
  // serves it either way (and the validating webhook refuses it).
  bool pinnable = true;
};

// `models`: the pod's gapless.io/gpu-models as parse_pod reads them (trimmed, non-empty).
// `label_values`: every value of nvidia.com/gpu.product some node carries. `known_models`: the
// model::model_key of every GPU model in the cluster, labelled or not.
ModelPin resolve_model_pin(const std::vector<std::string>& models,
                           const std::set<std::string>& label_values,
                           const std::set<std::string>& known_models = {});

// The JSONPatch operations that AND `key In values` into the pod's required node affinity: a
// new affinity when it has none, else the expression added to each nodeSelectorTerm (terms are
// ORed, so each must carry it). A term already holding exactly that expression (same key,
// operator In, same set of values) is left alone, so patching a patched pod changes nothing.
// Empty array: nothing to change (no values; or a required affinity with no terms, which
// matches no node already and would be widened by a term).
nlohmann::json model_pin_patch(const nlohmann::json& pod, const std::vector<std::string>& values,
                               std::string_view key = kGpuProductLabel);

}  // namespace gapless::k8s
