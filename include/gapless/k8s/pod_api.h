// What Gapless reads and writes of pods besides the Binding: a node's pods (the agent's device
// plugin, drift and usage checks), core/v1 Events (the extender's binder: Scheduled,
// FailedBinding; the agent's drift and share over-use checks) and the agent's annotations
// (gapless.io/allocated, gapless.io/share-overuse); and evictions (consolidation, which moves
// pods through the Eviction API so that PodDisruptionBudgets hold).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "gapless/k8s/api_client.h"

namespace gapless::k8s {

// GET /api/v1/pods?fieldSelector=spec.nodeName=NODE: the PodList, or why it could not be had
// ("listing this node's pods: ...").
Result<nlohmann::json> list_node_pods(ApiTransport& api, const std::string& node);

struct PodEvent {
  // Every member has an initializer, so a designated initializer may leave any out.
  std::string ns = "", name = "", uid = "";
  std::string field_path = "";  // "" or the container, e.g. "spec.containers{main}"
  std::string type = "Warning";
  std::string reason = "", message = "";
  std::string component = "";    // source.component
  std::string host = "";         // source.host (and reportingInstance); "" to leave both out
  std::string name_suffix = "";  // after "<pod>." in metadata.generateName
};

// The Event as JSON text (timestamps now, count 1). Invalid UTF-8 in a message is replaced.
std::string pod_event_json(const PodEvent& e);

// POSTs the Event to the pod's namespace. "" when the API server created it, else why not.
std::string post_pod_event(ApiTransport& api, const PodEvent& e);

// Sets (or, with an empty `value`, removes) one annotation of a pod by JSON merge patch. "" when
// the API server took it, else why not.
std::string annotate_pod(ApiTransport& api, const std::string& ns, const std::string& name,
                         const std::string& key, const std::string& value);

// What POST pods/NAME/eviction (policy/v1) answered.
enum class EvictionOutcome {
  kEvicted,  // 200/201: the pod is being deleted (dry run: it would be)
  kBlocked,  // 429: a PodDisruptionBudget allows no disruption now
  kGone,     // 404, or 409 on the UID precondition: that pod is not there any more
  kFailed,   // anything else (no answer, 403, 500, ...)
};
struct EvictionResult {
  EvictionOutcome outcome = EvictionOutcome::kFailed;
  std::string why;  // "" when evicted; else the API server's message (or the transport error)
};

// Evicts the pod (the UID as a precondition, so a pod recreated under the same name is never
// evicted by mistake). `dry_run`: ?dryRun=All, every check and nothing done.
EvictionResult evict_pod(ApiTransport& api, const std::string& ns, const std::string& name,
                         const std::string& uid, bool dry_run = false);

}  // namespace gapless::k8s
