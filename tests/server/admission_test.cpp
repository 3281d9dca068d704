// The admission webhook's decisions over a real Extender (server/admission.h, webhook.h's
// admission_facts / admission_checks): the mutating webhook pins models kube-scheduler can read,
// the validating one refuses each bad Gapless input with a message naming the field and admits
// good ones, and the AdmissionReview envelope. The HTTP round trip is webhook_tls_test.cpp.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "gapless/policy/loader.h"
#include "gapless/server/admission.h"
#include "gapless/server/webhook.h"
#include "policy_text.h"
#include "test_server.h"

namespace gapless::test {
namespace {

using server::AdmissionVerdict;

constexpr const char* kScheduler = "gpu-scheduler";  // test_server.h's pods

struct World {
  explicit World(placement::Policy policy = placement::builtin_policy())
      : extender(demo_cluster(), std::move(policy), binder, metrics),
        checks(server::admission_checks(extender, kScheduler)) {}
  server::Metrics metrics;
  server::InMemoryBinder binder;
  server::Extender extender;
  server::AdmissionChecks checks;

  server::AdmissionFacts facts() const { return server::admission_facts(extender, nullptr); }
  AdmissionVerdict validate(const json& pod) const {
    return server::validate_pod(pod, facts(), checks);
  }
  AdmissionVerdict mutate(const json& pod) const {
    return server::mutate_pod(pod, facts(), checks);
  }
};

json models_pod(const std::string& models, int gpus = 1) {
  return gpu_pod("p", "uid-p", gpus, {{"gapless.io/gpu-models", models}});
}

// The pod's required node affinity terms after the verdict's patch.
json pinned_terms(const json& pod, const AdmissionVerdict& v) {
  return pod.patch(v.patch)["spec"]["affinity"]["nodeAffinity"]
                           ["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"];
}

std::string review_of(const json& pod, const std::string& operation = "CREATE") {
  return json{{"apiVersion", "admission.k8s.io/v1"},
              {"kind", "AdmissionReview"},
              {"request",
               {{"uid", "705ab4f5-6393-11e8-b7cc-42010a800002"},
                {"kind", {{"group", ""}, {"version", "v1"}, {"kind", "Pod"}}},
                {"operation", operation},
                {"object", pod}}}}
      .dump();
}

}  // namespace

TEST_CASE("admission facts: the demo cluster's models, labels and MIG profiles",
          "[server][webhook]") {
  World w;
  const server::AdmissionFacts f = w.facts();
  CHECK(f.complete);
  CHECK(f.product_labels.contains("Tesla-T4"));
  CHECK(f.model_keys.contains("tesla-t4"));
  CHECK(f.mig_profiles.contains("1g.10gb"));
  CHECK(f.mig_profiles.contains("7g.80gb"));  // a reconfigurable A100-80GB
  CHECK_FALSE(f.mig_profiles.contains("7g.141gb"));
}

TEST_CASE("mutating webhook: gpu-models become a required node affinity", "[server][webhook]") {
  World w;
  const json pod = models_pod("tesla-t4, nvidia-h100-80gb-hbm3");
  AdmissionVerdict v = w.mutate(pod);
  CHECK(v.allowed);
  CHECK(v.warnings.empty());
  const json terms = pinned_terms(pod, v);
  REQUIRE(terms.size() == 1);
  CHECK(terms[0]["matchExpressions"][0]["values"] ==
        json::array({"NVIDIA-H100-80GB-HBM3", "Tesla-T4"}));

  // Idempotent: the patched pod needs no further patch.
  CHECK(w.mutate(pod.patch(v.patch)).patch.empty());

  // No annotation, no GPU, another scheduler: no patch.
  CHECK(w.mutate(gpu_pod("q", "uid-q", 1)).patch.empty());
  CHECK(w.mutate(test::pod("c", "uid-c", {{"cpu", "1"}}, {{"gapless.io/gpu-models", "Tesla-T4"}}))
            .patch.empty());
  json other = pod;
  other["spec"]["schedulerName"] = "default-scheduler";
  CHECK(w.mutate(other).patch.empty());
}

TEST_CASE("mutating webhook: a model GPUs have but no node label names leaves the pod unpinned",
          "[server][webhook]") {
  World w;
  server::AdmissionFacts f = w.facts();
  // Tesla-T4 GPUs known from the topology annotation only: no node carries the label.
  f.product_labels.erase("Tesla-T4");
  REQUIRE(f.model_keys.contains("tesla-t4"));
  const json pod = models_pod("Tesla-T4,NVIDIA-H100-80GB-HBM3");
  AdmissionVerdict v = server::mutate_pod(pod, f, w.checks);
  CHECK(v.allowed);
  CHECK(v.patch.empty());
  REQUIRE(v.warnings.size() == 1);
  CHECK_THAT(v.warnings[0],
             Catch::Contains("gapless.io/gpu-models") && Catch::Contains("Tesla-T4"));
  // A name no GPU has at all does not stop the pin (validation refuses that pod).
  v = server::mutate_pod(models_pod("NVIDIA-H100-80GB-HBM3,B200"), f, w.checks);
  CHECK(v.warnings.empty());
  CHECK(pinned_terms(models_pod("x"), v)[0]["matchExpressions"][0]["values"] ==
        json::array({"NVIDIA-H100-80GB-HBM3"}));
  // Still loading: nothing pinned (the labels are not known yet).
  f.complete = false;
  CHECK(server::mutate_pod(models_pod("NVIDIA-H100-80GB-HBM3"), f, w.checks).patch.empty());
}

TEST_CASE("validating webhook: each bad input is refused naming its field", "[server][webhook]") {
  World w(policy::parse_policy(policy_head() + R"(quotas:
  - name: team-a
    namespaces: [default]
    limits: {wholeGpus: 4}
)",
                               "test")
              .value());
  struct Case {
    std::string what;
    json pod;
    std::string field;
  };
  const std::vector<Case> cases = {
      {"unknown model", models_pod("B200"), "gapless.io/gpu-models"},
      {"bad topology", gpu_pod("p", "u", 2, {{"gapless.io/topology", "nvlink-please"}}),
       "gapless.io/topology"},
      {"unknown annotation", gpu_pod("p", "u", 1, {{"gapless.io/gpu-model", "Tesla-T4"}}),
       "gapless.io/gpu-model"},
      {"unknown profile", gpu_pod("p", "u", 1, {{"gapless.io/policy", "nope"}}),
       "gapless.io/policy"},
      {"share out of range", pod("p", "u", {{"gapless.io/gpu-compute", "1500"}}),
       "gapless.io/gpu-compute"},
      {"share count alone", pod("p", "u", {{"gapless.io/gpu-shared-count", "2"}}),
       "gapless.io/gpu-shared-count"},
      {"not a whole number", pod("p", "u", {{"nvidia.com/gpu", "1.5"}}), "nvidia.com/gpu"},
      {"typo'd MIG profile", pod("p", "u", {{"nvidia.com/mig-1g.10gbb", "1"}}),
       "nvidia.com/mig-1g.10gbb"},
      {"MIG profile no GPU offers", pod("p", "u", {{"nvidia.com/mig-7g.141gb", "1"}}),
       "nvidia.com/mig-7g.141gb"},
      {"over quota with nothing running", gpu_pod("p", "u", 8), "nvidia.com/gpu"},
  };
  for (const Case& c : cases) {
    INFO(c.what);
    const AdmissionVerdict v = w.validate(c.pod);
    INFO(v.message);
    CHECK_FALSE(v.allowed);
    CHECK(v.message.starts_with(c.field + ":"));
  }
}

TEST_CASE("validating webhook: good inputs are admitted", "[server][webhook]") {
  World w;
  for (const json& good :
       {models_pod("TESLA-T4"), gpu_pod("p", "u", 2, {{"gapless.io/topology", "none"}}),
        pod("p", "u", {{"gapless.io/gpu-memory", "4096"}, {"gapless.io/gpu-compute", "250"}}),
        pod("p", "u", {{"nvidia.com/mig-1g.10gb", "1"}}), pod("p", "u", {{"cpu", "1"}})}) {
    INFO(good.dump());
    const AdmissionVerdict v = w.validate(good);
    CHECK(v.allowed);
    CHECK(v.message.empty());
  }
  // Another scheduler's pod is not Gapless's: admitted, with a warning for its annotation.
  json other = models_pod("B200");
  other["spec"]["schedulerName"] = "default-scheduler";
  const AdmissionVerdict v = w.validate(other);
  CHECK(v.allowed);
  REQUIRE(v.warnings.size() == 1);
  CHECK_THAT(v.warnings[0], Catch::Contains("gapless.io/gpu-models"));
}

TEST_CASE("AdmissionReview: the response carries the uid, the verdict and a base64 JSONPatch",
          "[server][webhook]") {
  World w;
  const json pod = models_pod("tesla-t4");
  auto answer = server::answer_review(review_of(pod), [&](const json& p) { return w.mutate(p); });
  REQUIRE(answer);
  const json r = json::parse(*answer);
  CHECK(r["apiVersion"] == "admission.k8s.io/v1");
  CHECK(r["kind"] == "AdmissionReview");
  CHECK(r["response"]["uid"] == "705ab4f5-6393-11e8-b7cc-42010a800002");
  CHECK(r["response"]["allowed"] == true);
  CHECK(r["response"]["patchType"] == "JSONPatch");
  // base64 of the patch mutate_pod made.
  CHECK(r["response"]["patch"].get<std::string>().size() % 4 == 0);
  CHECK(r["response"]["patch"] != "");

  answer = server::answer_review(review_of(models_pod("B200")),
                                 [&](const json& p) { return w.validate(p); });
  REQUIRE(answer);
  const json denied = json::parse(*answer)["response"];
  CHECK(denied["allowed"] == false);
  CHECK(denied["status"]["code"] == 403);
  CHECK_THAT(denied["status"]["message"].get<std::string>(),
             Catch::StartsWith("gapless.io/gpu-models:"));

  // Not a Pod creation: allowed untouched, the decision never asked.
  bool asked = false;
  answer = server::answer_review(review_of(models_pod("B200"), "UPDATE"), [&](const json&) {
    asked = true;
    return AdmissionVerdict{};
  });
  REQUIRE(answer);
  CHECK_FALSE(asked);
  CHECK(json::parse(*answer)["response"]["allowed"] == true);
}

TEST_CASE("AdmissionReview: malformed reviews are errors, never crashes", "[server][webhook]") {
  auto decide = [](const json&) { return AdmissionVerdict{}; };
  for (const std::string& body :
       {std::string(""), std::string("{"), std::string("[]"), std::string("{\"kind\":1}"),
        std::string(R"({"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview"})"),
        std::string(R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"})"),
        std::string(R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview",
                        "request":{"kind":{"kind":"Pod"}}})"),
        std::string(R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview",
                        "request":{"uid":"x","kind":{"kind":"Pod"},"operation":"CREATE",
                        "object":"pod"}})"),
        std::string(100000, '[')}) {
    INFO(body.substr(0, 80));
    auto answer = server::answer_review(body, decide);
    REQUIRE_FALSE(answer);
    CHECK_THAT(answer.error(), Catch::StartsWith("AdmissionReview:"));
  }
}

}  // namespace gapless::test
