#include "gapless/k8s/json_fields.h"

#include <cctype>
#include <ctime>
#include <limits>

#include "gapless/k8s/quantity.h"

namespace gapless::k8s {

using nlohmann::json;

bool json_depth_ok(std::string_view text) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth) return false;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return true;
}

const json* field(const json& obj, std::string_view key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

const json* field(const json* obj, std::string_view key) {
  return obj == nullptr ? nullptr : field(*obj, key);
}

const json* field_path(const json& obj, std::initializer_list<std::string_view> keys) {
  const json* at = &obj;
  for (std::string_view key : keys) {
    at = field(at, key);
    if (at == nullptr) return nullptr;
  }
  return at;
}

std::string string_field(const json& obj, std::string_view key) {
  const json* v = field(obj, key);
  return v != nullptr && v->is_string() ? v->get<std::string>() : std::string();
}

std::optional<std::int64_t> unix_seconds(const std::string& rfc3339) {
  std::tm tm{};
  const char* rest = strptime(rfc3339.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
  if (rest == nullptr) return std::nullopt;
  if (*rest == '.') {
    ++rest;
    if (std::isdigit(static_cast<unsigned char>(*rest)) == 0) return std::nullopt;
    while (std::isdigit(static_cast<unsigned char>(*rest)) != 0) ++rest;
  }
  if (std::string_view(rest) != "Z") return std::nullopt;
  return static_cast<std::int64_t>(timegm(&tm));
}

std::optional<std::int64_t> as_int64(const json& value) {
  if (value.is_number_unsigned()) {
    auto u = value.get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
      return std::nullopt;
    }
    return static_cast<std::int64_t>(u);
  }
  if (value.is_number_integer()) return value.get<std::int64_t>();
  return std::nullopt;
}

std::map<std::string, std::string> string_map(const json* obj) {
  std::map<std::string, std::string> out;
  if (obj == nullptr || !obj->is_object()) return out;
  for (const auto& [key, value] : obj->items()) {
    if (value.is_string()) out.emplace(key, value.get<std::string>());
  }
  return out;
}

std::vector<std::string> comma_list(std::string_view text) {
  std::vector<std::string> out;
  while (!text.empty()) {
    const auto comma = text.find(',');
    const std::string_view item = text.substr(0, comma);
    const auto first = item.find_first_not_of(" \t\r\n");
    if (first != std::string_view::npos) {
      const auto last = item.find_last_not_of(" \t\r\n");
      out.emplace_back(item.substr(first, last - first + 1));
    }
    text = comma == std::string_view::npos ? std::string_view{} : text.substr(comma + 1);
  }
  return out;
}

Result<std::int64_t> quantity_value(const json& value) {
  if (value.is_string()) return parse_whole_quantity(value.get_ref<const std::string&>());
  // Reuse the string rules (sign, range) on the integer's decimal form.
  if (auto n = as_int64(value)) return parse_whole_quantity(std::to_string(*n));
  return Error{"must be a whole number, got " + json_text(value)};
}

std::string json_text(const json& value) {
  return value.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace gapless::k8s
