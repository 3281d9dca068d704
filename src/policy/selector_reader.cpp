#include "selector_reader.h"

#include <algorithm>
#include <cctype>

namespace gapless::policy::detail {
namespace {

using model::LabelRequirement;

const Keys kSelectorKeys = {"matchLabels", "matchExpressions"};
const Keys kExpressionKeys = {"key", "operator", "values"};

struct OpName {
  std::string_view name;
  LabelRequirement::Op op;
};
const OpName kOps[] = {{"In", LabelRequirement::Op::kIn},
                       {"NotIn", LabelRequirement::Op::kNotIn},
                       {"Exists", LabelRequirement::Op::kExists},
                       {"DoesNotExist", LabelRequirement::Op::kDoesNotExist}};

bool alnum(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0;
}

// A label value, or a key's name part: at most 63 of [A-Za-z0-9_.-], alphanumeric at both ends
// (validation.IsValidLabelValue / IsQualifiedName). Empty is a valid value, never a name.
bool valid_label_text(std::string_view s, bool may_be_empty) {
  return s.empty() ? may_be_empty : model::valid_label_value(s);
}

// A DNS subdomain, as a label key's prefix: lowercase alphanumerics, '-', '.', at most 253.
bool valid_prefix(std::string_view s) {
  if (s.empty() || s.size() > 253 || !alnum(s.front()) || !alnum(s.back())) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.';
  });
}

bool valid_key(std::string_view key) {
  const std::size_t slash = key.find('/');
  if (slash == std::string_view::npos) return valid_label_text(key, false);
  return valid_prefix(key.substr(0, slash)) && valid_label_text(key.substr(slash + 1), false);
}

bool check_key(YamlReader& r, const YAML::Mark& mark, const std::string& path,
               const std::string& key) {
  if (valid_key(key)) return true;
  return r.fail(mark, path,
                "invalid label key \"" + key +
                    "\" (an optional DNS prefix and /, then at most 63 of A-Z a-z 0-9 - _ ., "
                    "alphanumeric at both ends)");
}

bool read_match_labels(YamlReader& r, const Field& f, model::LabelSelector* out) {
  Fields labels;
  if (!r.read_map(f.value, f.mark(), f.path, nullptr, true, &labels)) return false;
  for (const Field& l : labels) {
    std::string value;
    if (!check_key(r, l.key_node.Mark(), l.path, l.key) ||
        !r.read_string(l.value, l.mark(), l.path, &value)) {
      return false;
    }
    if (!valid_label_text(value, true)) {
      return r.fail(l.mark(), l.path,
                    "invalid label value \"" + value +
                        "\" (at most 63 of A-Z a-z 0-9 - _ ., alphanumeric at both ends)");
    }
    out->match_labels[l.key] = std::move(value);
  }
  return true;
}

bool read_operator(YamlReader& r, const Field& f, LabelRequirement::Op* out) {
  std::string name;
  if (!r.read_string(f.value, f.mark(), f.path, &name)) return false;
  for (const OpName& o : kOps) {
    if (o.name == name) {
      *out = o.op;
      return true;
    }
  }
  return r.fail(f.mark(), f.path,
                "unknown operator \"" + name + "\" (In, NotIn, Exists, DoesNotExist)");
}

bool read_expression(YamlReader& r, const YAML::Node& node, const std::string& path,
                     LabelRequirement* out) {
  Fields fields;
  const Field* f = nullptr;
  if (!r.read_map(node, node.Mark(), path, &kExpressionKeys, false, &fields)) return false;
  if (!r.require(fields, "key", node.Mark(), path, &f) ||
      !r.read_string(f->value, f->mark(), f->path, &out->key) ||
      !check_key(r, f->mark(), f->path, out->key)) {
    return false;
  }
  if (!r.require(fields, "operator", node.Mark(), path, &f) || !read_operator(r, *f, &out->op)) {
    return false;
  }
  const Field* values = find_field(fields, "values");
  if (values != nullptr && !r.read_string_list(*values, &out->values)) return false;
  const bool listing =
      out->op == LabelRequirement::Op::kIn || out->op == LabelRequirement::Op::kNotIn;
  if (listing && out->values.empty()) {
    return r.fail(values ? values->mark() : f->mark(), values ? values->path : f->path,
                  "values must name at least one value when operator is In or NotIn");
  }
  if (!listing && !out->values.empty()) {
    return r.fail(values->mark(), values->path,
                  "values must be empty when operator is Exists or DoesNotExist");
  }
  return true;
}

}  // namespace

bool read_label_selector(YamlReader& r, const Field& f, model::LabelSelector* out) {
  Fields fields;
  if (!r.read_map(f.value, f.mark(), f.path, &kSelectorKeys, true, &fields)) return false;
  if (const Field* m = find_field(fields, "matchLabels"); m && !read_match_labels(r, *m, out)) {
    return false;
  }
  const Field* e = find_field(fields, "matchExpressions");
  if (e == nullptr || e->value.IsNull()) return true;
  if (!e->value.IsSequence()) {
    return r.fail(e->mark(), e->path, "expected a list of expressions, got " + describe(e->value));
  }
  for (std::size_t i = 0; i < e->value.size(); ++i) {
    LabelRequirement req;
    if (!read_expression(r, e->value[i], e->path + "[" + std::to_string(i) + "]", &req)) {
      return false;
    }
    out->match_expressions.push_back(std::move(req));
  }
  return true;
}

}  // namespace gapless::policy::detail
