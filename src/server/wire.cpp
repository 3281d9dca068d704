#include "wire.h"

#include <algorithm>
#include <cctype>
#include <string>
#include <unordered_set>
#include <vector>

#include "gapless/k8s/json_fields.h"

namespace gapless::server::wire {

using nlohmann::json;

const json* field(const json& obj, std::string_view key) {
  if (!obj.is_object()) return nullptr;
  const json* found = nullptr;
  if (auto it = obj.find(key); it != obj.end()) {
    found = &*it;
  } else {
    for (auto it2 = obj.begin(); it2 != obj.end(); ++it2) {
      const std::string& k = it2.key();
      if (k.size() == key.size() && std::equal(k.begin(), k.end(), key.begin(), [](char a, char b) {
            return std::tolower(static_cast<unsigned char>(a)) ==
                   std::tolower(static_cast<unsigned char>(b));
          })) {
        found = &it2.value();
        break;
      }
    }
  }
  return found == nullptr || found->is_null() ? nullptr : found;
}

Result<json> parse_object(std::string_view body) {
  // Answers and messages echo parts of the body, and dumping recurses once per level.
  if (!k8s::json_depth_ok(body)) return Error{std::string("malformed JSON: ") + k8s::kJsonTooDeep};
  // Keys are matched case-insensitively (field()), so "Pod" twice, or "Pod" and "pod", would
  // leave it to chance which one counts: refuse such a body. One key set per open object.
  std::vector<std::unordered_set<std::string>> open_keys;
  std::string duplicate;
  auto check_keys = [&](int, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::object_start) {
      open_keys.emplace_back();
    } else if (event == json::parse_event_t::object_end) {
      open_keys.pop_back();
    } else if (event == json::parse_event_t::key && duplicate.empty() && !open_keys.empty()) {
      std::string key = parsed.get<std::string>();
      std::transform(key.begin(), key.end(), key.begin(),
                     [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
      if (!open_keys.back().insert(key).second) duplicate = parsed.get<std::string>();
    }
    return true;
  };
  json j;
  try {
    j = json::parse(body, check_keys);
  } catch (const json::exception& e) {
    return Error{std::string("malformed JSON: ") + e.what()};
  }
  if (!duplicate.empty()) {
    return Error{"malformed JSON: duplicate key \"" + duplicate +
                 "\" in one object (keys are matched case-insensitively)"};
  }
  if (!j.is_object()) return Error{"request body must be a JSON object"};
  return j;
}

Result<std::vector<std::string>> node_names(const json& args, bool* full_mode) {
  std::vector<std::string> out;
  *full_mode = false;
  if (const json* names = field(args, "NodeNames")) {
    if (!names->is_array()) return Error{"NodeNames must be an array of node names"};
    for (const json& n : *names) {
      if (!n.is_string()) return Error{"NodeNames must be an array of node names"};
      out.push_back(n.get<std::string>());
    }
    return out;
  }
  if (const json* nodes = field(args, "Nodes")) {
    *full_mode = true;
    const json* items = nodes->is_object() ? field(*nodes, "items") : nullptr;
    if (!nodes->is_object() || (items != nullptr && !items->is_array())) {
      return Error{"Nodes must be a NodeList with an items array"};
    }
    if (items == nullptr) return out;
    for (const json& item : *items) {
      const json* meta = field(item, "metadata");
      const json* name = meta != nullptr ? field(*meta, "name") : nullptr;
      if (name == nullptr || !name->is_string()) {
        return Error{"Nodes.items[] needs metadata.name"};
      }
      out.push_back(name->get<std::string>());
    }
  }
  return out;
}

Result<std::string> string_field(const json& obj, std::string_view key) {
  const json* v = field(obj, key);
  if (v == nullptr || !v->is_string() || v->get_ref<const std::string&>().empty()) {
    return Error{std::string(key) + " is required and must be a non-empty string"};
  }
  return v->get<std::string>();
}

std::string dump(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace gapless::server::wire
