#include "gapless/k8s/namespace_sync.h"

namespace gapless::k8s {
namespace {

std::string name_of(const nlohmann::json& object) {
  const auto meta = object.find("metadata");
  if (!object.is_object() || meta == object.end() || !meta->is_object()) return "";
  const auto name = meta->find("name");
  return name != meta->end() && name->is_string() ? name->get<std::string>() : "";
}

}  // namespace

model::Labels object_labels(const nlohmann::json& object) {
  model::Labels out;
  if (!object.is_object() || !object.contains("metadata")) return out;
  const nlohmann::json& meta = object["metadata"];
  if (!meta.is_object() || !meta.contains("labels") || !meta["labels"].is_object()) return out;
  for (const auto& [key, value] : meta["labels"].items()) {
    if (value.is_string()) out.emplace(key, value.get<std::string>());
  }
  return out;
}

InformerHandlers namespace_handlers(NamespaceHooks hooks) {
  InformerHandlers h;
  h.on_list = [hooks](const std::vector<nlohmann::json>& items) {
    std::unordered_map<std::string, model::Labels> all;
    for (const nlohmann::json& ns : items) {
      if (std::string name = name_of(ns); !name.empty()) all[name] = object_labels(ns);
    }
    hooks.replace(std::move(all));
  };
  h.on_event = [hooks](const std::string& type, const nlohmann::json& ns) {
    const std::string name = name_of(ns);
    if (name.empty()) return;
    if (type == "DELETED") {
      hooks.erase(name);
    } else if (type == "ADDED" || type == "MODIFIED") {
      hooks.set(name, object_labels(ns));
    }
  };
  return h;
}

}  // namespace gapless::k8s
