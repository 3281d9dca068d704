// Labels and label selectors as plain data, with Kubernetes' matching rules
// (metav1.LabelSelector): quotas select namespaces by label, PodDisruptionBudgets select pods.
// The engine gets these structs; only drivers read them from Kubernetes objects.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace gapless::model {

using Labels = std::map<std::string, std::string>;

struct LabelRequirement {
  enum class Op { kIn, kNotIn, kExists, kDoesNotExist };
  std::string key;
  Op op = Op::kExists;
  std::vector<std::string> values;  // In / NotIn only
  bool operator==(const LabelRequirement&) const = default;
};

// Every matchLabels pair and every expression must hold (AND). An empty selector matches
// everything, as Kubernetes' LabelSelectorAsSelector makes it; NotIn and DoesNotExist match
// objects without the key.
struct LabelSelector {
  std::map<std::string, std::string> match_labels;
  std::vector<LabelRequirement> match_expressions;
  bool matches(const Labels& labels) const;
  bool operator==(const LabelSelector&) const = default;
};

// Whether `s` is a valid label value (validation.IsValidLabelValue): empty, or at most 63 of
// [A-Za-z0-9_.-], alphanumeric at both ends.
bool valid_label_value(std::string_view s);

// The label the API server puts on every namespace (Kubernetes >= 1.21), naming it.
inline constexpr const char* kNamespaceNameLabel = "kubernetes.io/metadata.name";

}  // namespace gapless::model
