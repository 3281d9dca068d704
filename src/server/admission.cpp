// The webhook's decisions and the AdmissionReview envelope (gapless/server/admission.h).
#include "gapless/server/admission.h"

#include <openssl/evp.h>

#include <algorithm>
#include <array>

#include "gapless/k8s/json_fields.h"
#include "gapless/k8s/model_pin.h"
#include "gapless/model/gpu.h"

namespace gapless::server {

using nlohmann::json;

namespace {

constexpr std::string_view kPrefix = "gapless.io/";
// The annotations a user may set (contract.md), and those Gapless itself writes on pods (the
// allocation record at bind, the agent's mark): a pod created from a copy of a bound one keeps
// them, and the extender's bind check decides what they are worth.
constexpr std::array<std::string_view, 5> kKnownAnnotations = {
    "gapless.io/gpu-models", "gapless.io/topology", "gapless.io/policy", "gapless.io/allocation",
    "gapless.io/allocated"};

bool gapless_pod(const json& pod, const AdmissionChecks& checks) {
  if (checks.scheduler_name.empty()) return true;
  const json* name = k8s::field_path(pod, {"spec", "schedulerName"});
  return name != nullptr && name->is_string() && *name == checks.scheduler_name;
}

std::vector<std::string> gapless_annotations(const json& pod) {
  std::vector<std::string> out;
  const json* a = k8s::field_path(pod, {"metadata", "annotations"});
  if (a == nullptr || !a->is_object()) return out;
  for (const auto& [key, value] : a->items()) {
    if (key.starts_with(kPrefix)) out.push_back(key);
  }
  return out;
}

std::string joined(const std::set<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out.empty() ? "none" : out;
}

// The resource a request kind is asked through, to name it in a refusal.
std::string request_field(const model::GpuRequest& r) {
  switch (r.kind) {
    case model::RequestKind::kWhole:
      return "nvidia.com/gpu";
    case model::RequestKind::kShared:
      return r.shared.memory_mib > 0 ? "gapless.io/gpu-memory" : "gapless.io/gpu-compute";
    case model::RequestKind::kMig:
      return "nvidia.com/mig-" + r.mig_profile;
    case model::RequestKind::kGpushare:
      return "aliyun.com/gpu-mem";
    case model::RequestKind::kNone:
      break;
  }
  return "resources";
}

AdmissionVerdict refuse(std::string message) {
  AdmissionVerdict v;
  v.allowed = false;
  v.message = std::move(message);
  return v;
}

// The checks that need the cluster; empty when the pod passes them.
std::string cluster_check(const k8s::ParsedPod& pod, const AdmissionFacts& facts,
                          const AdmissionChecks& checks) {
  if (checks.profile_error) {
    if (std::string why = checks.profile_error(pod); !why.empty()) return why;
  }
  if (pod.request.kind == model::RequestKind::kNone) return "";
  for (const std::string& m : pod.request.models) {
    if (!facts.model_keys.contains(model::model_key(m))) {
      return "gapless.io/gpu-models: no GPU in the cluster is of model \"" + m +
             "\" (models there: " + joined(facts.product_labels) + ")";
    }
  }
  if (pod.request.kind == model::RequestKind::kMig &&
      !facts.mig_profiles.contains(pod.request.mig_profile)) {
    return request_field(pod.request) + ": no GPU in the cluster offers MIG profile " +
           pod.request.mig_profile + " (offered: " + joined(facts.mig_profiles) + ")";
  }
  if (checks.quota_never_fits) {
    if (std::string why = checks.quota_never_fits(pod); !why.empty()) {
      return request_field(pod.request) + ": more than the namespace's quota allows even with " +
             "nothing else running (" + why + ")";
    }
  }
  return "";
}

std::string base64(const std::string& bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3) + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(bytes.data()),
                                static_cast<int>(bytes.size()));
  out.resize(static_cast<std::size_t>(n));
  return out;
}

}  // namespace

AdmissionVerdict mutate_pod(const json& pod, const AdmissionFacts& facts,
                            const AdmissionChecks& checks) {
  AdmissionVerdict v;
  if (!gapless_pod(pod, checks) || !facts.complete) return v;
  auto parsed = k8s::parse_pod(pod);
  // Unreadable pods are the validating webhook's to refuse; pods naming no models stay as written.
  if (!parsed || parsed->request.models.empty() ||
      parsed->request.kind == model::RequestKind::kNone) {
    return v;
  }
  const k8s::ModelPin pin =
      k8s::resolve_model_pin(parsed->request.models, facts.product_labels, facts.model_keys);
  if (!pin.pinnable) {
    v.warnings.push_back("gapless.io/gpu-models: no node carries " +
                         std::string(k8s::kGpuProductLabel) + "=" + pin.unmatched.front() +
                         "; the pod is not pinned to its models by node affinity (Gapless still "
                         "keeps it to them)");
    return v;
  }
  v.patch = k8s::model_pin_patch(pod, pin.values);
  return v;
}

AdmissionVerdict validate_pod(const json& pod, const AdmissionFacts& facts,
                              const AdmissionChecks& checks) {
  AdmissionVerdict v;
  const std::vector<std::string> ours = gapless_annotations(pod);
  if (!gapless_pod(pod, checks)) {
    if (!ours.empty()) {
      v.warnings.push_back(ours.front() + ": read only for pods with spec.schedulerName " +
                           checks.scheduler_name + "; this pod's scheduler ignores it");
    }
    return v;
  }
  for (const std::string& key : ours) {
    if (std::find(kKnownAnnotations.begin(), kKnownAnnotations.end(), key) ==
        kKnownAnnotations.end()) {
      return refuse(key +
                    ": unknown annotation (Gapless reads gapless.io/gpu-models, "
                    "gapless.io/topology and gapless.io/policy)");
    }
  }
  auto parsed = k8s::parse_pod(pod);
  if (!parsed) return refuse(parsed.error());
  if (!facts.complete) {
    v.warnings.push_back(
        "gapless is still loading the cluster: models, MIG profiles and quotas not checked");
    return v;
  }
  if (std::string why = cluster_check(*parsed, facts, checks); !why.empty()) return refuse(why);
  return v;
}

Result<std::string> answer_review(std::string_view body, const PodDecision& decide) {
  if (!k8s::json_depth_ok(body)) return Error{std::string("AdmissionReview: ") + k8s::kJsonTooDeep};
  json review = json::parse(body, nullptr, false);
  if (review.is_discarded() || !review.is_object()) {
    return Error{"AdmissionReview: the body is not a JSON object"};
  }
  if (k8s::string_field(review, "apiVersion") != "admission.k8s.io/v1" ||
      k8s::string_field(review, "kind") != "AdmissionReview") {
    return Error{
        "AdmissionReview: apiVersion must be admission.k8s.io/v1 and kind "
        "AdmissionReview (admissionReviewVersions: [v1])"};
  }
  const json* request = k8s::field(review, "request");
  if (request == nullptr || !request->is_object()) return Error{"AdmissionReview: no request"};
  const std::string uid = k8s::string_field(*request, "uid");
  if (uid.empty()) return Error{"AdmissionReview: request.uid is missing"};

  AdmissionVerdict verdict;
  const json* object = k8s::field(*request, "object");
  const json* kind = k8s::field(*request, "kind");
  const bool pod_create = kind != nullptr && k8s::string_field(*kind, "kind") == "Pod" &&
                          k8s::string_field(*kind, "group").empty() &&
                          k8s::string_field(*request, "operation") == "CREATE";
  if (pod_create) {
    if (object == nullptr || !object->is_object()) {
      return Error{"AdmissionReview: request.object is not a Pod"};
    }
    verdict = decide(*object);
  }
  json response = {{"uid", uid}, {"allowed", verdict.allowed}};
  if (!verdict.allowed) {
    response["status"] = {{"code", 403}, {"reason", "Forbidden"}, {"message", verdict.message}};
  }
  if (!verdict.patch.empty()) {
    response["patchType"] = "JSONPatch";
    response["patch"] = base64(verdict.patch.dump());
  }
  if (!verdict.warnings.empty()) response["warnings"] = verdict.warnings;
  return json{{"apiVersion", "admission.k8s.io/v1"},
              {"kind", "AdmissionReview"},
              {"response", std::move(response)}}
      .dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace gapless::server
