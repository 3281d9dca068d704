// pods/binding with the allocation record (docs/extender-protocol.md §2.8, §2.10, §4.2, §4.5).
#include "gapless/k8s/kube_binder.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <utility>

#include "gapless/k8s/allocation_record.h"
#include "gapless/k8s/json_fields.h"
#include "gapless/k8s/pod_api.h"
#include "url.h"

namespace gapless::k8s {

using nlohmann::json;

namespace {

std::string pod_path(const BindRequest& req) {
  return "/api/v1/namespaces/" + url_encode(req.ns) + "/pods/" + url_encode(req.name);
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

// What the pod got, from the allocation record the bind carries: "GPU 2 (GPU-...), ...".
std::string granted(const BindRequest& req) {
  auto it = req.annotations.find(std::string(kAllocationAnnotation));
  if (it == req.annotations.end()) return "no GPUs";
  const json r = json::parse(it->second, nullptr, /*allow_exceptions=*/false);
  if (!r.is_object()) return "the GPUs in its " + std::string(kAllocationAnnotation) + " record";
  std::string out;
  auto add = [&out](const std::string& part) { out += (out.empty() ? "" : ", ") + part; };
  for (const json& g : r.value("gpus", json::array())) {
    std::string part = "GPU " + std::to_string(g.value("index", -1));
    if (!g.value("uuid", "").empty()) part += " (" + g.value("uuid", "") + ")";
    if (g.contains("memoryMiB") || g.contains("computeMilli")) {
      part += " shared: " + std::to_string(g.value("memoryMiB", 0)) + " MiB, " +
              std::to_string(g.value("computeMilli", 0)) + " milli";
    }
    add(part);
  }
  for (const json& m : r.value("mig", json::array())) {
    add("MIG " + m.value("profile", "?") +
        (m.contains("gpu") ? " on GPU " + std::to_string(m.value("gpu", -1)) : ""));
  }
  return out.empty() ? "no GPUs" : out;
}

}  // namespace

KubeBinder::KubeBinder(ApiTransport& api, std::string component, BindEvents events)
    : api_(api),
      component_(std::move(component)),
      events_(events),
      tokens_(events.burst),
      last_(std::chrono::steady_clock::now()) {}

bool KubeBinder::take_token() {
  std::lock_guard lock(mu_);
  const auto now = std::chrono::steady_clock::now();
  const std::chrono::duration<double> elapsed = now - last_;
  last_ = now;
  tokens_ = std::min(events_.burst, tokens_ + elapsed.count() * events_.per_second);
  if (tokens_ < 1) return false;
  tokens_ -= 1;
  return true;
}

void KubeBinder::warn_fenced(const std::string& ns, const std::string& name,
                             const std::string& node, const std::string& why) {
  if (!take_token()) return;
  post_event(BindRequest{ns, name, "", node, {}}, "Warning", "NodeFenced",
             "the allocation record of this pod cannot be used (" + why + "); node " + node +
                 " takes no Gapless pods until it is fixed or the pod is gone");
}

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
  if (r->ok()) {
    // Only after the binding is durable, and never at the cost of the bind: best effort.
    if (events_.on_success && take_token()) {
      post_event(req, "Normal", "GaplessBound",
                 "Gapless bound the pod to node " + req.node + " (the best-scoring node for " +
                     "NVLink topology and GPU fragmentation among those offered): " + granted(req));
    }
    return Status::Ok();
  }
  const std::string message = api_error(*r);
  if (r->status == 409 && already_bound_as_asked(api_, req)) return Status::Ok();
  post_event(req, "Warning", "FailedBinding",
             "binding to node " + req.node + " failed: " + message);
  return Error{message};
}

void KubeBinder::post_event(const BindRequest& req, const std::string& type,
                            const std::string& reason, const std::string& message) {
  // Best effort: an Event is only for `kubectl describe pod`.
  (void)post_pod_event(api_, PodEvent{.ns = req.ns,
                                      .name = req.name,
                                      .uid = req.uid,
                                      .type = type,
                                      .reason = reason,
                                      .message = message,
                                      .component = component_});
}

}  // namespace gapless::k8s
