// The informer's unbound pods, for the bind check (unbound_pods.h).
#include "gapless/k8s/unbound_pods.h"

#include <nlohmann/json.hpp>
#include <utility>

#include "gapless/k8s/json_fields.h"
#include "gapless/k8s/node_facts.h"

namespace gapless::k8s {

using nlohmann::json;

namespace {

std::string key_of(const std::string& ns, const std::string& name) {
  return ns + "/" + name;
}

// "ns/name"; empty for an object without a name.
std::string key_of(const json& pod) {
  const json* meta = field(pod, "metadata");
  if (meta == nullptr || !meta->is_object()) return "";
  const std::string name = string_field(*meta, "name");
  return name.empty() ? "" : key_of(string_field(*meta, "namespace"), name);
}

// What is kept of a pod: nothing when it is bound or its requests do not parse (bind reads
// those from the API server).
std::optional<UnboundPod> kept(const json& pod) {
  const json* spec = field(pod, "spec");
  if (spec != nullptr && !string_field(*spec, "nodeName").empty()) return std::nullopt;
  Result<ParsedPod> parsed = parse_pod(pod);
  if (!parsed || parsed->info.uid.empty()) return std::nullopt;
  return UnboundPod{std::move(*parsed), read_pod_placement(pod)};
}

}  // namespace

InformerHandlers UnboundPodStore::feed(InformerHandlers inner) {
  InformerHandlers out = inner;
  out.on_list = [this, model = inner.on_list](const std::vector<json>& items) {
    if (model) model(items);
    replace(items);
  };
  out.on_event = [this, model = inner.on_event](const std::string& type, const json& pod) {
    if (model) model(type, pod);
    apply(type, pod);
  };
  return out;
}

std::optional<UnboundPod> UnboundPodStore::find(const std::string& ns,
                                                const std::string& name) const {
  const std::string key = key_of(ns, name);
  std::lock_guard lock(mu_);
  auto it = pods_.find(key);
  if (it == pods_.end()) return std::nullopt;
  return it->second;
}

void UnboundPodStore::replace(const std::vector<json>& pods) {
  std::unordered_map<std::string, UnboundPod> fresh;
  for (const json& p : pods) {
    std::string key = key_of(p);
    if (key.empty()) continue;
    if (auto pod = kept(p)) fresh.insert_or_assign(std::move(key), std::move(*pod));
  }
  std::lock_guard lock(mu_);
  pods_ = std::move(fresh);
}

void UnboundPodStore::apply(const std::string& type, const json& pod) {
  std::string key = key_of(pod);
  if (key.empty()) return;
  std::optional<UnboundPod> now = type == "DELETED" ? std::nullopt : kept(pod);
  std::lock_guard lock(mu_);
  if (now) {
    pods_.insert_or_assign(std::move(key), std::move(*now));
  } else {
    pods_.erase(key);  // gone, bound, or unreadable: a bind of it reads the API server
  }
}

std::size_t UnboundPodStore::size() const {
  std::lock_guard lock(mu_);
  return pods_.size();
}

}  // namespace gapless::k8s
