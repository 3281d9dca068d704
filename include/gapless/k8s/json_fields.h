// Reading fields out of Kubernetes JSON objects without exceptions: every accessor checks the
// type first and treats a missing key and an explicit null alike (the API server omits empty
// fields, hand-written YAML writes `limits: null` or `containers: ~`).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gapless/model/result.h"

namespace gapless::k8s {

// The deepest nesting of arrays and objects accepted in JSON from outside (request bodies,
// annotations, files). Kubernetes objects nest a few dozen levels at most. nlohmann parses any
// depth, but copying, comparing and dumping a value recurse once per level, so a 200 KB request
// body of brackets overflowed the stack (fuzz/regressions/extender_filter/).
inline constexpr int kMaxJsonDepth = 512;

// Whether no array or object in `text` nests deeper than kMaxJsonDepth (brackets inside strings
// do not count). Exact for valid JSON; invalid JSON fails to parse anyway. Check before parsing.
bool json_depth_ok(std::string_view text);
inline constexpr const char* kJsonTooDeep = "nested deeper than 512 levels";  // kMaxJsonDepth

// obj[key] when obj is an object holding key with a non-null value; nullptr otherwise.
const nlohmann::json* field(const nlohmann::json& obj, std::string_view key);
const nlohmann::json* field(const nlohmann::json* obj, std::string_view key);

// Follows keys one after another: field_path(pod, {"metadata", "annotations"}).
const nlohmann::json* field_path(const nlohmann::json& obj,
                                 std::initializer_list<std::string_view> keys);

// The string at obj[key]; empty when absent or not a string.
std::string string_field(const nlohmann::json& obj, std::string_view key);

// The value as int64 when it is a JSON integer that fits; nullopt for anything else
// (floats, strings, unsigned values above 2^63-1).
std::optional<std::int64_t> as_int64(const nlohmann::json& value);

// Seconds since the Unix epoch of a metav1.Time as the API server writes it
// ("2026-11-27T10:00:00Z", UTC; fractional seconds, as in a MicroTime, are dropped); nullopt for
// anything else.
std::optional<std::int64_t> unix_seconds(const std::string& rfc3339);

// The string entries of an object (labels, annotations); other entries are skipped.
std::map<std::string, std::string> string_map(const nlohmann::json* obj);

// The items of a comma-separated annotation value ("a, b,,c" -> a, b, c), each trimmed of
// whitespace, empty items left out.
std::vector<std::string> comma_list(std::string_view text);

// A resource quantity as it appears in JSON: a string for parse_whole_quantity, or (from YAML
// written by hand) a non-negative integer up to 2^53. The error message quotes the value.
Result<std::int64_t> quantity_value(const nlohmann::json& value);

// Compact JSON text for error messages; never throws on invalid UTF-8.
std::string json_text(const nlohmann::json& value);

}  // namespace gapless::k8s
