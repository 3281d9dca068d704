#include "gapless/k8s/device_asks.h"

#include <nlohmann/json.hpp>

#include "gapless/k8s/json_fields.h"

namespace gapless::k8s {

namespace {

std::int64_t asks_for(const nlohmann::json& resources, std::string_view resource) {
  for (const char* where : {"limits", "requests"}) {
    const nlohmann::json* list = field(resources, where);
    const nlohmann::json* q = list != nullptr ? field(*list, resource) : nullptr;
    if (q == nullptr) continue;
    auto n = quantity_value(*q);
    return n.ok() ? *n : 0;
  }
  return 0;
}

// The plugin resources one container names, in name order (a container asking two of them is
// allocated resource by resource; the kubelet's order among them does not matter for pairing).
std::set<std::string> named_resources(const nlohmann::json& resources) {
  std::set<std::string> out;
  for (const char* where : {"limits", "requests"}) {
    const nlohmann::json* list = field(resources, where);
    if (list == nullptr || !list->is_object()) continue;
    for (const auto& [name, value] : list->items()) {
      if (is_plugin_resource(name)) out.insert(name);
    }
  }
  return out;
}

}  // namespace

bool is_plugin_resource(std::string_view resource) {
  constexpr std::string_view kMig = "nvidia.com/mig-";
  return resource == "nvidia.com/gpu" || resource == "gapless.io/gpu-shared-count" ||
         (resource.starts_with(kMig) && resource.size() > kMig.size());
}

std::vector<DeviceAsk> device_asks(const nlohmann::json& pod) {
  std::vector<DeviceAsk> out;
  if (!pod.is_object()) return out;
  for (const auto& [key, init] : {std::pair{"initContainers", true}, {"containers", false}}) {
    const nlohmann::json* list = field_path(pod, {"spec", key});
    if (list == nullptr || !list->is_array()) continue;
    for (const auto& c : *list) {
      const nlohmann::json* resources = field(c, "resources");
      if (resources == nullptr || !resources->is_object()) continue;
      for (const std::string& r : named_resources(*resources)) {
        const std::int64_t n = asks_for(*resources, r);
        if (n > 0) out.push_back({string_field(c, "name"), r, n, init});
      }
    }
  }
  return out;
}

std::set<std::pair<std::string, std::int64_t>> device_classes(const nlohmann::json& pod) {
  std::set<std::pair<std::string, std::int64_t>> out;
  for (const DeviceAsk& a : device_asks(pod)) out.insert({a.resource, a.count});
  return out;
}

bool marked_allocated(const nlohmann::json& pod) {
  return field_path(pod, {"metadata", "annotations", kAllocatedAnnotation}) != nullptr;
}

}  // namespace gapless::k8s
