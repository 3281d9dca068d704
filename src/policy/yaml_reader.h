// Private to the policy layer: strict reading of yaml-cpp nodes with messages of the form
// "<source>:<line>: <key path>: <what is wrong>". Every read_* returns false after recording the
// first error; later errors are dropped so the message points at the first problem.
#pragma once

#include <yaml-cpp/yaml.h>

#include <string>
#include <string_view>
#include <vector>

namespace gapless::policy::detail {

using Keys = std::vector<std::string_view>;

// One `key: value` entry of a YAML map, in document order.
struct Field {
  std::string key;
  YAML::Node key_node;
  YAML::Node value;
  std::string path;  // full key path, e.g. "profiles[0].gpu.weight"

  // yaml-cpp marks an empty (null) value at the token after it, so point at the key instead.
  YAML::Mark mark() const { return value.IsNull() ? key_node.Mark() : value.Mark(); }
};
using Fields = std::vector<Field>;

const Field* find_field(const Fields& fields, std::string_view key);

template <typename Names>
std::string join(const Names& names) {
  std::string out;
  for (const auto& n : names) {
    if (!out.empty()) out += ", ";
    out += n;
  }
  return out;
}

// "a.b" + "c" -> "a.b.c"; "" + "c" -> "c".
std::string child_path(const std::string& path, std::string_view key);

// What a node holds, for "expected X, got Y" messages: a map, a list, "text", nothing.
std::string describe(const YAML::Node& node);

// "<source>:<line>: " for a mark (line 1 when the mark is unknown).
std::string location(const std::string& source, const YAML::Mark& mark);

class YamlReader {
 public:
  explicit YamlReader(std::string source) : source_(std::move(source)) {}
  const std::string& error() const { return error_; }

  // Records an error (the first one wins) and returns false. An empty path reads "(root)".
  bool fail(const YAML::Mark& mark, const std::string& path, const std::string& what);

  // Reads a map into fields, rejecting non-scalar, duplicate and (unless `allowed` is null)
  // unknown keys. With `null_is_empty`, an empty value (`select:`) reads as an empty map.
  bool read_map(const YAML::Node& node, const YAML::Mark& mark, const std::string& path,
                const Keys* allowed, bool null_is_empty, Fields* out);
  // Finds a key that must be present; `mark` and `path` locate the map it belongs to.
  bool require(const Fields& fields, std::string_view key, const YAML::Mark& mark,
               const std::string& path, const Field** out);
  bool read_string(const YAML::Node& node, const YAML::Mark& mark, const std::string& path,
                   std::string* out);
  // A finite number, >= min when `inclusive`, else > min.
  bool read_number(const Field& f, double min, bool inclusive, double* out);
  // A list of non-empty strings, appended to *out; an empty value is an empty list.
  bool read_string_list(const Field& f, std::vector<std::string>* out);

 private:
  std::string source_;
  std::string error_;
};

}  // namespace gapless::policy::detail
