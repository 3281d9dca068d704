// The Kubernetes binder: POST /api/v1/namespaces/{ns}/pods/{name}/binding with the pod's UID and
// the allocation record in metadata.annotations, so spec.nodeName and the record land in one
// atomic update. A 409 is success only when the pod is already on the same node with the same
// record (a retry after a lost reply). On failure an Event explains it on the pod; on success,
// when asked, a Normal Event names the GPUs the pod got (rate-limited).
//
// Before the bind, admit takes the API server's pod and refuses (with a Warning FailedBinding
// Event, rate-limited with the success Events) when its UID is not the bind's, it is bound to
// another node, its GPU requests are not those /filter was sent, or its nodeSelector, required
// node affinity or untolerated NoSchedule/NoExecute taints rule the node out (node_fit.h):
// whoever can reach the extender cannot make it bind a pod where kube-scheduler would not. The
// pod comes from the pod informer's unbound pods (set_unbound_pods) when it holds the pod under
// the bind's UID, else from a read of the pod; the node's labels and taints from the node
// informer (set_node_facts), else from a read of the node. A pod the informer still shows unbound
// that another bind has bound meanwhile is refused by the API server: a Binding of a bound pod
// answers 409.
//
// Thread-safety: bind and warn_fenced may be called concurrently.
#pragma once

#include <chrono>
#include <mutex>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>

#include "gapless/k8s/api_client.h"
#include "gapless/k8s/binder.h"
#include "gapless/k8s/node_facts.h"
#include "gapless/k8s/unbound_pods.h"

namespace gapless::k8s {

// Events beyond bind failures (always posted). Off by default (gapless-extender --bound-events):
// kube-scheduler posts its own Scheduled Event for every bind, and the record names the GPUs.
struct BindEvents {
  bool on_success = false;  // a Normal "GaplessBound" Event naming the GPUs, MIG slices, shares
  double per_second = 5;    // at most this many success Events per second on average,
  double burst = 20;        // and this many at once; the rest are dropped (the bind is not)
};

class KubeBinder final : public Binder {
 public:
  explicit KubeBinder(ApiTransport& api, std::string component = "gapless-extender",
                      BindEvents events = {});
  // The API server's pod, when it may be bound as `req` says (see above).
  Result<ParsedPod> admit(const BindRequest& req, const ParsedPod& filtered) override;
  Status bind(const BindRequest& req) override;
  // Where admit finds nodes' labels and taints (the node informer's); null (the default): a
  // read of the node per bind. Set before binding; must outlive this binder.
  void set_node_facts(const NodeFactsStore* store) { node_facts_ = store; }
  // Where admit finds pods (the pod informer's unbound ones); null (the default): a read of the
  // pod per bind. Set before binding; must outlive this binder.
  void set_unbound_pods(const UnboundPodStore* store) { unbound_pods_ = store; }
  // A Warning "NodeFenced" Event on pod `ns`/`name`, whose allocation record fenced `node`.
  // Rate-limited with the success Events. Best effort.
  void warn_fenced(const std::string& ns, const std::string& name, const std::string& node,
                   const std::string& why);

 private:
  void post_event(const BindRequest& req, const std::string& type, const std::string& reason,
                  const std::string& message);
  bool take_token();  // the rate limit: true when an Event may be posted now
  // admit's parts (kube_binder_admit.cpp).
  Result<NodeFacts> node_facts(const std::string& node);
  std::optional<std::string> refusal(const BindRequest& req, const ParsedPod& pod,
                                     const PodPlacement& placement, const ParsedPod& filtered);
  // The refused bind's Error, after its Warning Event on the pod (whose UID is `uid`).
  Error refuse(const BindRequest& req, const std::string& uid, const std::string& why);
  ApiTransport& api_;
  const NodeFactsStore* node_facts_ = nullptr;
  const UnboundPodStore* unbound_pods_ = nullptr;
  const std::string component_;
  const BindEvents events_;
  std::mutex mu_;
  double tokens_;
  std::chrono::steady_clock::time_point last_;
};

}  // namespace gapless::k8s
