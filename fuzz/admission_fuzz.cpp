// AdmissionReview bodies (server::answer_review) through both webhooks' decisions, with fixed
// cluster facts. An answer must be an AdmissionReview with the request's uid; a refusal must say
// why; the mutating webhook's patch must apply to the pod (RFC 6902) and be idempotent: the
// patched pod needs no further patch.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>

#include "fuzz_util.h"
#include "gapless/server/admission.h"

namespace {

using gapless::fuzz::check;
using gapless::server::AdmissionVerdict;
using nlohmann::json;

const gapless::server::AdmissionFacts& facts() {
  static const gapless::server::AdmissionFacts f = [] {
    gapless::server::AdmissionFacts out;
    out.product_labels = {"NVIDIA-H100-80GB-HBM3", "Tesla-T4", "TESLA-T4"};
    out.model_keys = {"nvidia-h100-80gb-hbm3", "tesla-t4", "nvidia-l4"};
    out.mig_profiles = {"1g.10gb", "3g.40gb"};
    return out;
  }();
  return f;
}

AdmissionVerdict mutate_checked(const json& pod) {
  const gapless::server::AdmissionChecks checks;  // every pod is Gapless's
  AdmissionVerdict v = gapless::server::mutate_pod(pod, facts(), checks);
  check(v.allowed, "the mutating webhook refused a pod");
  if (v.patch.empty()) return v;
  json patched;
  try {
    patched = pod.patch(v.patch);
  } catch (const json::exception& e) {
    gapless::fuzz::violated("the pin does not apply to the pod", e.what());
  }
  check(gapless::server::mutate_pod(patched, facts(), checks).patch.empty(),
        "the pin is not idempotent", patched.dump());
  return v;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view body = gapless::fuzz::as_text(data, size);
  for (const bool mutate : {true, false}) {
    auto answer = gapless::server::answer_review(body, [&](const json& pod) {
      if (mutate) return mutate_checked(pod);
      AdmissionVerdict v = gapless::server::validate_pod(pod, facts(), {});
      check(v.allowed == v.message.empty(), "a refusal without a message, or a message alone");
      return v;
    });
    if (!answer) {
      check(!answer.error().empty(), "a malformed review without a message");
      continue;
    }
    const json r = json::parse(*answer, nullptr, false);
    check(!r.is_discarded() && r.value("kind", "") == "AdmissionReview", "not an AdmissionReview");
    check(r["response"].value("uid", "") != "", "a response without the request's uid");
  }
  return 0;
}
