// pods/binding with the allocation record (docs/extender-protocol.md §2.8, §2.10, §4.2, §4.5).
#include "gapless/k8s/kube_binder.h"

#include <chrono>
#include <ctime>
#include <nlohmann/json.hpp>
#include <utility>

#include "gapless/k8s/allocation_record.h"
#include "gapless/k8s/json_fields.h"
#include "url.h"

namespace gapless::k8s {

using nlohmann::json;

namespace {

std::string pod_path(const BindRequest& req) {
  return "/api/v1/namespaces/" + url_encode(req.ns) + "/pods/" + url_encode(req.name);
}

std::string rfc3339_now() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// After a 409: is the pod already bound the way we asked (a retry after a lost reply)?
bool already_bound_as_asked(ApiTransport& api, const BindRequest& req) {
  Result<ApiResponse> r = api.call("GET", pod_path(req));
  if (!r.ok() || !r->ok()) return false;
  const json pod = json::parse(r->body, nullptr, /*allow_exceptions=*/false);
  if (!pod.is_object()) return false;
  const json* meta = field(pod, "metadata");
  if (meta == nullptr) return false;
  if (!req.uid.empty() && string_field(*meta, "uid") != req.uid) return false;
  const json* spec = field(pod, "spec");
  if (spec == nullptr || string_field(*spec, "nodeName") != req.node) return false;
  const std::string key(kAllocationAnnotation);
  const json* theirs = field(field(meta, "annotations"), key);
  auto ours = req.annotations.find(key);
  if (ours == req.annotations.end()) return theirs == nullptr;  // a pod without GPUs
  return theirs != nullptr && theirs->is_string() && theirs->get<std::string>() == ours->second;
}

}  // namespace

KubeBinder::KubeBinder(ApiTransport& api, std::string component)
    : api_(api), component_(std::move(component)) {}

Status KubeBinder::bind(const BindRequest& req) {
  json annotations = json::object();
  for (const auto& [k, v] : req.annotations) annotations[k] = v;
  const json body = {
      {"kind", "Binding"},
      {"apiVersion", "v1"},
      {"metadata",
       {{"name", req.name}, {"namespace", req.ns}, {"uid", req.uid}, {"annotations", annotations}}},
      {"target", {{"kind", "Node"}, {"apiVersion", "v1"}, {"name", req.node}}},
  };
  Result<ApiResponse> r = api_.call("POST", pod_path(req) + "/binding",
                                    body.dump(-1, ' ', false, json::error_handler_t::replace));
  if (!r.ok()) {
    // The API server did not answer: an Event would most likely fail the same way, and waiting
    // for it would spend more of kube-scheduler's bind timeout.
    return Error{r.error()};
  }
  if (r->ok()) return Status::Ok();
  const std::string message = api_error(*r);
  if (r->status == 409 && already_bound_as_asked(api_, req)) return Status::Ok();
  post_event(req, "FailedBinding", "binding to node " + req.node + " failed: " + message);
  return Error{message};
}

void KubeBinder::post_event(const BindRequest& req, const std::string& reason,
                            const std::string& message) {
  const std::string now = rfc3339_now();
  const json event = {
      {"apiVersion", "v1"},
      {"kind", "Event"},
      {"metadata", {{"generateName", req.name + "."}, {"namespace", req.ns}}},
      {"involvedObject",
       {{"kind", "Pod"},
        {"apiVersion", "v1"},
        {"namespace", req.ns},
        {"name", req.name},
        {"uid", req.uid}}},
      {"reason", reason},
      {"message", message},
      {"type", "Warning"},
      {"source", {{"component", component_}}},
      {"firstTimestamp", now},
      {"lastTimestamp", now},
      {"count", 1},
  };
  // Best effort: the bind already failed, and an Event is only for `kubectl describe pod`.
  (void)api_.call("POST", "/api/v1/namespaces/" + url_encode(req.ns) + "/events",
                  event.dump(-1, ' ', false, json::error_handler_t::replace));
}

}  // namespace gapless::k8s
