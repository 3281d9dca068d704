#include "gapless/model/labels.h"

#include <algorithm>
#include <cctype>

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

bool valid_label_value(std::string_view s) {
  if (s.empty()) return true;
  const auto alnum = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; };
  if (s.size() > 63 || !alnum(s.front()) || !alnum(s.back())) return false;
  return std::all_of(s.begin(), s.end(),
                     [&](char c) { return alnum(c) || c == '-' || c == '_' || c == '.'; });
}

}  // namespace gapless::model
