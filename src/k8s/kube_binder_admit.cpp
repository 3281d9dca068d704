// KubeBinder::admit: the pod that is bound is the API server's pod (the pod informer's copy, else
// a read), checked against its node (kube_binder.h; docs/extender-flags-and-routes.md "What bind
// checks").
#include <nlohmann/json.hpp>
#include <optional>
#include <utility>

#include "gapless/k8s/json_fields.h"
#include "gapless/k8s/kube_binder.h"
#include "gapless/k8s/node_fit.h"
#include "url.h"

namespace gapless::k8s {

using nlohmann::json;

namespace {

// One object: nullopt when the API server says 404, an error when it cannot be read.
Result<std::optional<json>> read_object(ApiTransport& api, const std::string& path,
                                        const std::string& what) {
  Result<ApiResponse> r = api.call("GET", path);
  if (!r.ok()) return Error{"cannot read " + what + " from the API server: " + r.error()};
  if (r->status == 404) return std::optional<json>();
  if (!r->ok()) return Error{"cannot read " + what + " from the API server: " + api_error(*r)};
  json object = json::parse(r->body, nullptr, /*allow_exceptions=*/false);
  if (!object.is_object()) return Error{"the API server's " + what + " is not a JSON object"};
  return std::optional<json>(std::move(object));
}

}  // namespace

Result<NodeFacts> KubeBinder::node_facts(const std::string& node) {
  if (node_facts_ != nullptr) {
    if (auto facts = node_facts_->find(node)) return std::move(*facts);
  }
  // Not watched here, or newer than the node informer's last event: one read settles it.
  auto read = read_object(api_, "/api/v1/nodes/" + url_encode(node), "node " + node);
  if (!read) return Error{read.error()};
  if (!*read) return Error{"the API server has no such node"};
  return read_node_facts(**read);
}

// Why the API server's `pod` may not be bound as `req` asks; nullopt when it may.
std::optional<std::string> KubeBinder::refusal(const BindRequest& req, const ParsedPod& pod,
                                               const PodPlacement& placement,
                                               const ParsedPod& filtered) {
  if (pod.info.uid != req.uid) {
    return "has UID " + pod.info.uid + " in the API server, not " + req.uid +
           " as the bind says (deleted and created again?)";
  }
  if (!pod.info.node.empty() && pod.info.node != req.node) {
    return "is already bound to node " + pod.info.node;
  }
  if (pod.request != filtered.request) {
    return "asks the API server for other GPU resources than the /filter body said; a filter "
           "body that disagrees with the API server's pod is never used for bind";
  }
  // Already on this node (a retry after a lost reply): the Binding's 409 path decides, and a
  // taint added since must not fail it.
  if (pod.info.node == req.node) return std::nullopt;
  auto node = node_facts(req.node);
  if (!node) return "cannot be checked against node " + req.node + ": " + node.error();
  return node_misfit(placement, *node);
}

Error KubeBinder::refuse(const BindRequest& req, const std::string& uid, const std::string& why) {
  if (take_token()) {
    post_event(BindRequest{req.ns, req.name, uid, req.node, {}}, "Warning", "FailedBinding",
               "Gapless refused to bind the pod to node " + req.node + ": the pod " + why);
  }
  return Error{"gapless: pod " + req.ns + "/" + req.name + " " + why};
}

Result<ParsedPod> KubeBinder::admit(const BindRequest& req, const ParsedPod& filtered) {
  // The pod informer's copy of this very pod (same UID), unbound: no read (unbound_pods.h says
  // why the fields checked are as good as the API server's). A pod it does not hold yet (created
  // a moment ago), or under another UID, is read.
  if (unbound_pods_ != nullptr) {
    std::optional<UnboundPod> known = unbound_pods_->find(req.ns, req.name);
    if (known && known->pod.info.uid == req.uid) {
      std::optional<std::string> why = refusal(req, known->pod, known->placement, filtered);
      if (!why) return std::move(known->pod);
      return refuse(req, req.uid, *why);
    }
  }
  const std::string who = "pod " + req.ns + "/" + req.name;
  auto read = read_object(
      api_, "/api/v1/namespaces/" + url_encode(req.ns) + "/pods/" + url_encode(req.name), who);
  if (!read) return Error{"gapless: " + read.error() + "; kube-scheduler will retry the pod"};
  if (!*read) return Error{"gapless: " + who + " does not exist in the API server"};
  const json& object = **read;
  Result<ParsedPod> pod = parse_pod(object);
  std::optional<std::string> why;
  if (!pod) {
    why = "cannot be read from the API server's copy: " + pod.error();
  } else {
    why = refusal(req, *pod, read_pod_placement(object), filtered);
  }
  if (!why) return pod;
  const json* meta = field(object, "metadata");
  return refuse(req, pod ? pod->info.uid : meta ? string_field(*meta, "uid") : "", *why);
}

}  // namespace gapless::k8s
