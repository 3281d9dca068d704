// Who consolidation may move, from the Pod object (docs/consolidation.md "Who may move"): only
// pods a ReplicaSet, StatefulSet or Job recreates, never in kube-system or being deleted; the
// annotation opts in ("true") or out (anything else).
#include "gapless/k8s/pod_movability.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "gapless/k8s/pod_request.h"

namespace gapless::k8s {
namespace {

using model::Movability;
using nlohmann::json;

json pod(const std::string& api, const std::string& kind, bool controller = true,
         const std::string& ns = "ml") {
  json p = {{"metadata", {{"name", "p"}, {"namespace", ns}, {"uid", "u"}}},
            {"spec", json::object()}};
  if (!kind.empty()) {
    p["metadata"]["ownerReferences"] = json::array(
        {{{"apiVersion", api}, {"kind", kind}, {"name", "owner"}, {"controller", controller}}});
  }
  return p;
}

json annotated(json p, json value) {
  p["metadata"]["annotations"][kMovableAnnotation] = std::move(value);
  return p;
}

TEST_CASE("movability: controllers that recreate the pod, and the annotation", "[k8s][movable]") {
  CHECK(pod_movability(pod("apps/v1", "ReplicaSet")) == Movability::kByPolicy);
  CHECK(pod_movability(pod("apps/v1", "StatefulSet")) == Movability::kByPolicy);
  CHECK(pod_movability(pod("batch/v1", "Job")) == Movability::kByPolicy);
  CHECK(pod_movability(annotated(pod("apps/v1", "ReplicaSet"), "true")) == Movability::kOptedIn);
  // Opting out, or a value that is not "true": never.
  CHECK(pod_movability(annotated(pod("apps/v1", "ReplicaSet"), "false")) == Movability::kNever);
  CHECK(pod_movability(annotated(pod("apps/v1", "ReplicaSet"), "yes")) == Movability::kNever);
  CHECK(pod_movability(annotated(pod("apps/v1", "ReplicaSet"), true)) == Movability::kNever);
}

TEST_CASE("movability: bare, DaemonSet, kube-system and deleted pods never move",
          "[k8s][movable]") {
  CHECK(pod_movability(annotated(pod("", ""), "true")) == Movability::kNever);  // bare
  CHECK(pod_movability(annotated(pod("apps/v1", "DaemonSet"), "true")) == Movability::kNever);
  CHECK(pod_movability(annotated(pod("v1", "Node"), "true")) == Movability::kNever);  // static
  CHECK(pod_movability(annotated(pod("example.com/v1", "ReplicaSet"), "true")) ==
        Movability::kNever);  // a look-alike of another group
  // An owner that is not the controller recreates nothing.
  CHECK(pod_movability(annotated(pod("apps/v1", "ReplicaSet", false), "true")) ==
        Movability::kNever);
  CHECK(pod_movability(annotated(pod("apps/v1", "ReplicaSet", true, "kube-system"), "true")) ==
        Movability::kNever);
  json deleting = annotated(pod("apps/v1", "ReplicaSet"), "true");
  deleting["metadata"]["deletionTimestamp"] = "2026-11-28T10:00:00Z";
  CHECK(pod_movability(deleting) == Movability::kNever);
  // Malformed objects: never, and no throw.
  CHECK(pod_movability(json("x")) == Movability::kNever);
  CHECK(pod_movability(json{{"metadata", {{"ownerReferences", "x"}}}}) == Movability::kNever);
  CHECK(pod_movability(json{{"metadata", {{"ownerReferences", {1, "x", nullptr}}}}}) ==
        Movability::kNever);
}

TEST_CASE("movability: parse_pod carries it into PodInfo", "[k8s][movable]") {
  auto parsed = parse_pod(annotated(pod("apps/v1", "ReplicaSet"), "true"));
  REQUIRE(parsed.ok());
  CHECK(parsed->info.movable == Movability::kOptedIn);
  parsed = parse_pod(pod("", ""));
  REQUIRE(parsed.ok());
  CHECK(parsed->info.movable == Movability::kNever);
}

}  // namespace
}  // namespace gapless::k8s
