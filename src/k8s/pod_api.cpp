#include "gapless/k8s/pod_api.h"

#include <chrono>
#include <ctime>
#include <nlohmann/json.hpp>

#include "url.h"

namespace gapless::k8s {

namespace {

using nlohmann::json;

std::string rfc3339_now() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace

Result<json> list_node_pods(ApiTransport& api, const std::string& node) {
  auto r = api.call("GET", "/api/v1/pods?fieldSelector=spec.nodeName%3D" + url_encode(node));
  if (!r.ok()) return Error{"listing this node's pods: " + r.error()};
  if (!r->ok()) return Error{"listing this node's pods: " + api_error(*r)};
  json pods = json::parse(r->body, nullptr, false);
  if (pods.is_discarded()) return Error{"listing this node's pods: the answer is not JSON"};
  return pods;
}

std::string pod_event_json(const PodEvent& e) {
  const std::string now = rfc3339_now();
  json involved = {
      {"kind", "Pod"}, {"apiVersion", "v1"}, {"namespace", e.ns}, {"name", e.name}, {"uid", e.uid}};
  if (!e.field_path.empty()) involved["fieldPath"] = e.field_path;
  json source = {{"component", e.component}};
  json event = {
      {"apiVersion", "v1"},
      {"kind", "Event"},
      {"metadata", {{"generateName", e.name + "." + e.name_suffix}, {"namespace", e.ns}}},
      {"involvedObject", std::move(involved)},
      {"reason", e.reason},
      {"message", e.message},
      {"type", e.type},
      {"firstTimestamp", now},
      {"lastTimestamp", now},
      {"count", 1},
  };
  if (!e.host.empty()) {
    source["host"] = e.host;
    event["reportingComponent"] = e.component;
    event["reportingInstance"] = e.host;
  }
  event["source"] = std::move(source);
  return event.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string post_pod_event(ApiTransport& api, const PodEvent& e) {
  Result<ApiResponse> r =
      api.call("POST", "/api/v1/namespaces/" + url_encode(e.ns) + "/events", pod_event_json(e));
  if (!r.ok()) return r.error();
  return r->ok() ? "" : api_error(*r);
}

std::string annotate_pod(ApiTransport& api, const std::string& ns, const std::string& name,
                         const std::string& key, const std::string& value) {
  const json patch = {
      {"metadata", {{"annotations", {{key, value.empty() ? json() : json(value)}}}}}};
  Result<ApiResponse> r = api.call(
      "PATCH", "/api/v1/namespaces/" + url_encode(ns) + "/pods/" + url_encode(name),
      patch.dump(-1, ' ', false, json::error_handler_t::replace), "application/merge-patch+json");
  if (!r.ok()) return r.error();
  return r->ok() ? "" : api_error(*r);
}

EvictionResult evict_pod(ApiTransport& api, const std::string& ns, const std::string& name,
                         const std::string& uid, bool dry_run) {
  json eviction = {{"apiVersion", "policy/v1"},
                   {"kind", "Eviction"},
                   {"metadata", {{"name", name}, {"namespace", ns}}}};
  if (!uid.empty()) eviction["deleteOptions"] = {{"preconditions", {{"uid", uid}}}};
  if (dry_run) eviction["deleteOptions"]["dryRun"] = json::array({"All"});
  const std::string path = "/api/v1/namespaces/" + url_encode(ns) + "/pods/" + url_encode(name) +
                           "/eviction" + (dry_run ? "?dryRun=All" : "");
  Result<ApiResponse> r =
      api.call("POST", path, eviction.dump(-1, ' ', false, json::error_handler_t::replace));
  if (!r.ok()) return {EvictionOutcome::kFailed, r.error()};
  if (r->ok()) return {EvictionOutcome::kEvicted, ""};
  const std::string why = api_error(*r);
  if (r->status == 429) return {EvictionOutcome::kBlocked, why};
  if (r->status == 404 || r->status == 409) return {EvictionOutcome::kGone, why};
  return {EvictionOutcome::kFailed, why};
}

}  // namespace gapless::k8s
