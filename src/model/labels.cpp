#include "gapless/model/labels.h"

#include <algorithm>

namespace gapless::model {
namespace {

bool holds(const LabelRequirement& r, const Labels& labels) {
  const auto it = labels.find(r.key);
  const bool has = it != labels.end();
  const auto listed = [&] {
    return has && std::find(r.values.begin(), r.values.end(), it->second) != r.values.end();
  };
  switch (r.op) {
    case LabelRequirement::Op::kIn:
      return listed();
    case LabelRequirement::Op::kNotIn:
      return !listed();
    case LabelRequirement::Op::kExists:
      return has;
    case LabelRequirement::Op::kDoesNotExist:
      return !has;
  }
  return false;
}

}  // namespace

bool LabelSelector::matches(const Labels& labels) const {
  for (const auto& [key, value] : match_labels) {
    const auto it = labels.find(key);
    if (it == labels.end() || it->second != value) return false;
  }
  return std::all_of(match_expressions.begin(), match_expressions.end(),
                     [&](const LabelRequirement& r) { return holds(r, labels); });
}

}  // namespace gapless::model
