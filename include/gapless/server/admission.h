// The admission webhook's decisions (docs/admission-webhook.md): for a pod being created, the
// model pin (k8s/model_pin.h) the mutating webhook adds, and the checks of every Gapless
// annotation and GPU request the validating webhook refuses a pod on, each refusal naming the
// field. The checks are the extender's own (k8s::parse_pod, the policy's profiles, the engine's
// quotas): a pod the webhook admits is one the extender can read. And the AdmissionReview v1
// envelope around them. No I/O: server/webhook.h serves them.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "gapless/k8s/pod_request.h"
#include "gapless/model/result.h"

namespace gapless::server {

// What the webhook knows of the cluster, gathered for each review.
struct AdmissionFacts {
  // Values of nvidia.com/gpu.product that nodes carry: what a pin may name.
  std::set<std::string> product_labels;
  // model::model_key of every GPU model Gapless knows of (its model's GPUs, and the labels).
  std::set<std::string> model_keys;
  // MIG profiles some GPU offers: a static layout's instances, a reconfigurable GPU's family's
  // profiles, the counts GFD labels advertise.
  std::set<std::string> mig_profiles;
  // False while the extender is still loading the cluster: the checks that need the cluster
  // (models, MIG profiles, quotas) are skipped with a warning, and nothing is pinned.
  bool complete = true;
};

// What the cluster-wide checks need besides the facts. Null members: that check is skipped.
struct AdmissionChecks {
  // Pods of this kube-scheduler profile are Gapless's; others are admitted untouched (with a
  // warning when they carry gapless.io/ annotations, which nothing would read).
  std::string scheduler_name;
  // Why gapless.io/policy cannot be served (a profile the policy lacks); empty when it can.
  std::function<std::string(const k8s::ParsedPod&)> profile_error;
  // Why the pod could never fit its namespace's quotas; empty when it could.
  std::function<std::string(const k8s::ParsedPod&)> quota_never_fits;
};

struct AdmissionVerdict {
  bool allowed = true;
  std::string message;                             // why refused: names the field first
  nlohmann::json patch = nlohmann::json::array();  // JSONPatch operations; empty: none
  std::vector<std::string> warnings;               // shown by kubectl; never refuse
};

// The mutating webhook: the model pin for a Gapless pod naming models (k8s::resolve_model_pin).
// A name no label carries but GPUs in the cluster have: no pin, and a warning (a pin without it
// would keep the pod off nodes that serve it). Names no GPU has at all are the validating
// webhook's to refuse. Always allows.
AdmissionVerdict mutate_pod(const nlohmann::json& pod, const AdmissionFacts& facts,
                            const AdmissionChecks& checks);

// The validating webhook: refuses a Gapless pod whose annotations or GPU requests the extender
// could never serve: unreadable (parse_pod's error), an unknown gapless.io/ annotation, a
// profile the policy lacks, a model no GPU has, a MIG profile no GPU offers, a request over
// its namespace's quota even with nothing running.
AdmissionVerdict validate_pod(const nlohmann::json& pod, const AdmissionFacts& facts,
                              const AdmissionChecks& checks);

// One AdmissionReview v1 request body -> the AdmissionReview response body. `decide` gets
// request.object for a Pod being created; anything else (other kinds, operations, dry-run
// included as any create) is allowed as is. An error when the body is no AdmissionReview v1
// with a request.uid (the caller answers 400 with it).
using PodDecision = std::function<AdmissionVerdict(const nlohmann::json& pod)>;
Result<std::string> answer_review(std::string_view body, const PodDecision& decide);

}  // namespace gapless::server
