// The admission webhook's model pin (k8s/model_pin.h): gapless.io/gpu-models mapped to the exact
// nvidia.com/gpu.product values nodes carry, and the JSONPatch that ANDs it into the pod's
// required node affinity. Patches are applied with nlohmann's RFC 6902 implementation, as the
// API server would.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "gapless/k8s/model_pin.h"

namespace gapless::k8s {
namespace {

using nlohmann::json;

const std::set<std::string> kLabels = {"NVIDIA-A100-SXM4-80GB", "NVIDIA-H100-80GB-HBM3",
                                       "Tesla-T4"};
constexpr const char* kRequired = "requiredDuringSchedulingIgnoredDuringExecution";

json bare_pod() {
  return {{"metadata", {{"name", "p"}}},
          {"spec", {{"containers", json::array({{{"name", "main"}, {"image", "x"}}})}}}};
}

json pin_expr(const std::vector<std::string>& values) {
  return {{"key", "nvidia.com/gpu.product"}, {"operator", "In"}, {"values", values}};
}

json terms_of(const json& pod) {
  return pod["spec"]["affinity"]["nodeAffinity"][kRequired]["nodeSelectorTerms"];
}

}  // namespace

TEST_CASE("model pin: names map case-insensitively to the exact label values", "[k8s][pin]") {
  ModelPin pin = resolve_model_pin({"nvidia-h100-80gb-hbm3", "TESLA-T4"}, kLabels);
  CHECK(pin.values == std::vector<std::string>{"NVIDIA-H100-80GB-HBM3", "Tesla-T4"});
  CHECK(pin.unmatched.empty());

  pin = resolve_model_pin({"tesla-t4", "B200"}, kLabels);
  CHECK(pin.values == std::vector<std::string>{"Tesla-T4"});
  CHECK(pin.unmatched == std::vector<std::string>{"B200"});
  CHECK(pin.pinnable);  // no GPU is a B200: no node is lost by pinning to the T4s

  // L4 GPUs exist (known without the label): a pin to the T4s alone would lose those nodes.
  pin = resolve_model_pin({"tesla-t4", "NVIDIA-L4"}, kLabels, {"tesla-t4", "nvidia-l4"});
  CHECK(pin.unmatched == std::vector<std::string>{"NVIDIA-L4"});
  CHECK_FALSE(pin.pinnable);

  // Two nodes spelling one model differently: both spellings are pinned.
  pin = resolve_model_pin({"tesla-t4"}, {"Tesla-T4", "TESLA-T4"});
  CHECK(pin.values == std::vector<std::string>{"TESLA-T4", "Tesla-T4"});
}

TEST_CASE("model pin: a pod without affinity gets one required term", "[k8s][pin]") {
  const json pod = bare_pod();
  const json ops = model_pin_patch(pod, {"Tesla-T4"});
  REQUIRE(ops.size() == 1);
  CHECK(ops[0]["path"] == "/spec/affinity");
  const json out = pod.patch(ops);
  CHECK(terms_of(out) ==
        json::array({{{"matchExpressions", json::array({pin_expr({"Tesla-T4"})})}}}));
  CHECK(out["spec"]["containers"] == pod["spec"]["containers"]);
}

TEST_CASE("model pin: no values, no patch", "[k8s][pin]") {
  CHECK(model_pin_patch(bare_pod(), {}).empty());
  CHECK(model_pin_patch(json("not a pod"), {"Tesla-T4"}).empty());
}

TEST_CASE("model pin: ANDed into every term of an existing required affinity", "[k8s][pin]") {
  json pod = bare_pod();
  const json zone = {{"key", "topology.kubernetes.io/zone"}, {"operator", "In"}, {"values", {"a"}}};
  const json rack = {{"key", "rack"}, {"operator", "Exists"}};
  const json host = {{"key", "metadata.name"}, {"operator", "In"}, {"values", {"n1"}}};
  pod["spec"]["affinity"] = {
      {"podAntiAffinity", {{"preferredDuringSchedulingIgnoredDuringExecution", json::array()}}},
      {"nodeAffinity",
       {{kRequired,
         {{"nodeSelectorTerms", json::array({{{"matchExpressions", json::array({zone})}},
                                             {{"matchExpressions", json::array({rack})}},
                                             {{"matchFields", json::array({host})}}})}}}}}};
  const json out = pod.patch(model_pin_patch(pod, {"NVIDIA-H100-80GB-HBM3", "Tesla-T4"}));
  const json pin = pin_expr({"NVIDIA-H100-80GB-HBM3", "Tesla-T4"});
  const json terms = terms_of(out);
  REQUIRE(terms.size() == 3);
  CHECK(terms[0]["matchExpressions"] == json::array({zone, pin}));
  CHECK(terms[1]["matchExpressions"] == json::array({rack, pin}));
  CHECK(terms[2]["matchFields"] == json::array({host}));
  CHECK(terms[2]["matchExpressions"] == json::array({pin}));
  CHECK(out["spec"]["affinity"]["podAntiAffinity"] == pod["spec"]["affinity"]["podAntiAffinity"]);
}

TEST_CASE("model pin: affinity without nodeAffinity, or nodeAffinity without required",
          "[k8s][pin]") {
  json pod = bare_pod();
  pod["spec"]["affinity"] = {{"podAffinity", json::object()}};
  json out = pod.patch(model_pin_patch(pod, {"Tesla-T4"}));
  CHECK(out["spec"]["affinity"].contains("podAffinity"));
  CHECK(terms_of(out).size() == 1);

  pod["spec"]["affinity"] = {
      {"nodeAffinity", {{"preferredDuringSchedulingIgnoredDuringExecution", json::array()}}}};
  out = pod.patch(model_pin_patch(pod, {"Tesla-T4"}));
  CHECK(out["spec"]["affinity"]["nodeAffinity"].contains(
      "preferredDuringSchedulingIgnoredDuringExecution"));
  CHECK(terms_of(out)[0]["matchExpressions"] == json::array({pin_expr({"Tesla-T4"})}));
}

TEST_CASE("model pin: patching a patched pod changes nothing", "[k8s][pin]") {
  json pod = bare_pod();
  pod["spec"]["affinity"] = {
      {"nodeAffinity",
       {{kRequired,
         {{"nodeSelectorTerms",
           json::array(
               {{{"matchExpressions", json::array({{{"key", "zone"}, {"operator", "Exists"}}})}},
                json::object()})}}}}}};
  const std::vector<std::string> values = {"Tesla-T4", "NVIDIA-H100-80GB-HBM3"};
  const json once = pod.patch(model_pin_patch(pod, values));
  CHECK(once != pod);
  CHECK(model_pin_patch(once, values).empty());
  // The same values in another order are the same pin.
  CHECK(model_pin_patch(once, {"NVIDIA-H100-80GB-HBM3", "Tesla-T4"}).empty());
  // Other values are another pin: ANDed too (the narrower set wins, as the extender's filter).
  CHECK(model_pin_patch(once, {"Tesla-T4"}).size() == 2);
}

TEST_CASE("model pin: a required affinity with no terms is left alone", "[k8s][pin]") {
  json pod = bare_pod();
  pod["spec"]["affinity"]["nodeAffinity"][kRequired] = {{"nodeSelectorTerms", json::array()}};
  CHECK(model_pin_patch(pod, {"Tesla-T4"}).empty());
}

}  // namespace gapless::k8s
