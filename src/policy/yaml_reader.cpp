#include "yaml_reader.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <sstream>
#include <system_error>
#include <utility>

namespace gapless::policy::detail {

const Field* find_field(const Fields& fields, std::string_view key) {
  for (const Field& f : fields) {
    if (f.key == key) return &f;
  }
  return nullptr;
}

std::string child_path(const std::string& path, std::string_view key) {
  return path.empty() ? std::string(key) : path + "." + std::string(key);
}

std::string describe(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Map:
      return "a map";
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Scalar:
      return "\"" + node.Scalar() + "\"";
    case YAML::NodeType::Null:
      return "nothing";
    default:
      return "an undefined value";
  }
}

std::string location(const std::string& source, const YAML::Mark& mark) {
  const int line = mark.is_null() || mark.line < 0 ? 1 : mark.line + 1;
  return source + ":" + std::to_string(line) + ": ";
}

bool YamlReader::fail(const YAML::Mark& mark, const std::string& path, const std::string& what) {
  if (error_.empty()) {
    error_ = location(source_, mark) + (path.empty() ? "(root)" : path) + ": " + what;
  }
  return false;
}

bool YamlReader::read_map(const YAML::Node& node, const YAML::Mark& mark, const std::string& path,
                          const Keys* allowed, bool null_is_empty, Fields* out) {
  out->clear();
  if (node.IsNull() && null_is_empty) return true;
  if (!node.IsMap()) return fail(mark, path, "expected a map, got " + describe(node));
  for (const auto& entry : node) {  // a proxy: copy the nodes out, do not bind to its members
    const YAML::Node key = entry.first;
    if (!key.IsScalar()) return fail(key.Mark(), path, "map keys must be plain names");
    Field f{key.Scalar(), key, entry.second, child_path(path, key.Scalar())};
    if (find_field(*out, f.key)) return fail(key.Mark(), f.path, "duplicate key");
    if (allowed && std::find(allowed->begin(), allowed->end(), f.key) == allowed->end()) {
      return fail(key.Mark(), f.path,
                  "unknown key \"" + f.key + "\" (known: " + join(*allowed) + ")");
    }
    out->push_back(std::move(f));
  }
  return true;
}

bool YamlReader::require(const Fields& fields, std::string_view key, const YAML::Mark& mark,
                         const std::string& path, const Field** out) {
  *out = find_field(fields, key);
  if (*out) return true;
  return fail(mark, child_path(path, key), "required key is missing");
}

bool YamlReader::read_string(const YAML::Node& node, const YAML::Mark& mark,
                             const std::string& path, std::string* out) {
  if (!node.IsScalar()) return fail(mark, path, "expected a string, got " + describe(node));
  *out = node.Scalar();
  return true;
}

bool YamlReader::read_number(const Field& f, double min, bool inclusive, double* out) {
  if (!f.value.IsScalar()) {
    return fail(f.mark(), f.path, "expected a number, got " + describe(f.value));
  }
  const std::string& s = f.value.Scalar();
  double v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || !std::isfinite(v)) {
    return fail(f.mark(), f.path, "expected a finite number, got \"" + s + "\"");
  }
  if (inclusive ? v < min : v <= min) {
    std::ostringstream bound;
    bound << (inclusive ? ">= " : "> ") << min;
    return fail(f.mark(), f.path, "must be " + bound.str() + ", got " + s);
  }
  *out = v;
  return true;
}

bool YamlReader::read_string_list(const Field& f, std::vector<std::string>* out) {
  if (f.value.IsNull()) return true;
  if (!f.value.IsSequence()) {
    return fail(f.mark(), f.path, "expected a list of strings, got " + describe(f.value));
  }
  for (std::size_t i = 0; i < f.value.size(); ++i) {
    const YAML::Node& e = f.value[i];
    const std::string path = f.path + "[" + std::to_string(i) + "]";
    std::string s;
    if (!read_string(e, e.Mark(), path, &s)) return false;
    if (s.empty()) return fail(e.Mark(), path, "must not be empty");
    out->push_back(std::move(s));
  }
  return true;
}

}  // namespace gapless::policy::detail
