// Bind trusts the cluster, not the caller (issue 38, item 1): any client that reaches the
// extender can POST /filter with a pod body of its own making, then /bind. In Kubernetes mode
// the pod that is bound is the API server's, checked against the node; a body that disagrees
// is never used. Against the fake API server, wired as gapless-extender runs.
#if __has_include("fake_api_server.h")
#include <catch2/catch.hpp>

#include "../k8s/k8s_objects.h"
#include "fake_api_server.h"
#include "gapless/server/extender.h"
#include "kube_extender.h"

using namespace gapless;
using nlohmann::json;

namespace {

json filter_args(const json& pod, const std::string& node) {
  return json{{"Pod", pod}, {"Nodes", nullptr}, {"NodeNames", {node}}};
}

json bind_args(const std::string& name, const std::string& uid, const std::string& node) {
  return json{{"PodName", name}, {"PodNamespace", "ml"}, {"PodUID", uid}, {"Node", node}};
}

// The crafted pair: /filter with `body` (which passes `node`), then /bind of it to `node`.
std::string filter_then_bind(test::KubeExtender& live, const json& body, const std::string& node) {
  const json f = json::parse(live.extender().filter(filter_args(body, node).dump()));
  REQUIRE(f.at("Error") == "");
  REQUIRE(f.at("NodeNames") == json::array({node}));  // Gapless itself sees no reason to refuse
  const json& meta = body.at("metadata");
  const json b =
      json::parse(live.extender().bind(bind_args(meta.at("name"), meta.at("uid"), node).dump()));
  return b.at("Error").get<std::string>();
}

// Warning FailedBinding Events the extender left on pod ml/`name`.
std::vector<std::string> refusals(const test::FakeApiServer& server, const std::string& name) {
  std::vector<std::string> out;
  for (const json& e : server.events()) {
    if (e.value("reason", "") == "FailedBinding" && e.value("type", "") == "Warning" &&
        e.at("involvedObject").value("name", "") == name) {
      out.push_back(e.value("message", ""));
    }
  }
  return out;
}

bool bound(const test::FakeApiServer& server, const std::string& name) {
  auto p = server.pod("ml", name);
  return p && p->at("spec").contains("nodeName");
}

}  // namespace

TEST_CASE("a crafted /filter + /bind cannot place a pod where kube-scheduler would not",
          "[server][k8s][bind_trust]") {
  test::FakeApiServer server;
  json tainted = k8s::testing::topology_node("n2", 8);
  tainted["spec"]["taints"] = {
      {{"key", "dedicated"}, {"value", "infra"}, {"effect", "NoSchedule"}}};
  json labelled = k8s::testing::topology_node("n1", 8);
  labelled["metadata"]["labels"] = {{"pool", "train"}};

  // What the API server holds: each pod with the constraint its owner wants to escape.
  json selective = k8s::testing::pod_object("selective", "uid-sel", "");
  selective["spec"]["nodeSelector"] = {{"pool", "reserved"}};  // no node has it
  json intolerant = k8s::testing::pod_object("intolerant", "uid-int", "");
  json picky = k8s::testing::pod_object("picky", "uid-picky", "");
  picky["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] = {
      {"nodeSelectorTerms",
       {{{"matchExpressions", {{{"key", "pool"}, {"operator", "In"}, {"values", {"infer"}}}}}}}}};
  json legit = k8s::testing::pod_object("legit", "uid-legit", "");
  legit["spec"]["nodeSelector"] = {{"pool", "train"}};
  json tolerant = k8s::testing::pod_object("tolerant", "uid-tol", "");
  tolerant["spec"]["tolerations"] = {
      {{"key", "dedicated"}, {"operator", "Equal"}, {"value", "infra"}, {"effect", "NoSchedule"}}};
  json large = k8s::testing::pod_object("large", "uid-large", "");
  large["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "8";
  server.load({labelled, tainted}, {selective, intolerant, picky, legit, tolerant, large});

  test::KubeExtender live(server);
  REQUIRE(live.wait([&] { return live.extender().ready(); }));

  // The filter bodies drop the constraints (pod_object: one GPU, nothing else).
  auto stripped = [](const std::string& name, const std::string& uid) {
    return k8s::testing::pod_object(name, uid, "");
  };

  // The crafted pair for pod `name` to `node`: refused with `error`, the pod not bound, one
  // Warning Event on it naming the node; returns the Event's message.
  auto refused = [&](const std::string& name, const std::string& uid, const std::string& node,
                     const std::string& error) {
    INFO(name);
    CHECK(filter_then_bind(live, stripped(name, uid), node) ==
          "gapless: pod ml/" + name + " " + error);
    CHECK_FALSE(bound(server, name));
    const auto events = refusals(server, name);
    REQUIRE(events.size() == 1);
    CHECK_THAT(events[0], Catch::StartsWith("Gapless refused to bind the pod to node " + node +
                                            ": the pod " + error));
  };
  SECTION("nodeSelector no node matches") {
    refused("selective", "uid-sel", "n1",
            "has nodeSelector pool=reserved, which node n1 does not match (its label is train)");
  }
  SECTION("a taint the pod does not tolerate") {
    refused("intolerant", "uid-int", "n2",
            "does not tolerate taint dedicated=infra:NoSchedule of node n2");
  }
  SECTION("required node affinity") {
    refused("picky", "uid-picky", "n1", "has a required node affinity that node n1 does not match");
  }
  SECTION("a UID that is not the API server's pod's") {
    refused("legit", "uid-forged", "n1",
            "has UID uid-legit in the API server, not uid-forged as the bind says (deleted and "
            "created again?)");
  }
  SECTION("GPU requests that are not the API server's pod's") {
    // The API pod asks for 8 GPUs; the body says 1, to get past the pod's own size.
    refused("large", "uid-large", "n1",
            "asks the API server for other GPU resources than the /filter body said; a filter "
            "body that disagrees with the API server's pod is never used for bind");
  }
  SECTION("refusals leave the model and the API server as they were") {
    server.clear_log();
    for (const auto& [name, uid, node] :
         {std::tuple{"selective", "uid-sel", "n1"}, std::tuple{"intolerant", "uid-int", "n2"}}) {
      CHECK(filter_then_bind(live, stripped(name, uid), node) != "");
    }
    CHECK(live.allocations() == 0);
    CHECK(server.bindings().empty());
    CHECK_THAT(live.extender().metrics_text(),
               Catch::Contains("gapless_binds_total{outcome=\"refused\"} 2"));
    // Both pods were judged from the pod informer's copies (same UIDs), without a read.
    CHECK(server.count_requests("GET", "/api/v1/namespaces/ml/pods/") == 0);
  }
  SECTION("the pods' own constraints, met, still bind") {
    CHECK(filter_then_bind(live, legit, "n1") == "");
    CHECK(filter_then_bind(live, tolerant, "n2") == "");
    CHECK(server.pod("ml", "legit")->at("spec").at("nodeName") == "n1");
    CHECK(server.pod("ml", "tolerant")->at("spec").at("nodeName") == "n2");
    CHECK(live.allocations() == 2);
    CHECK(refusals(server, "legit").empty());
    SECTION("and a retry of a bind that landed is still fine") {
      const json again =
          json::parse(live.extender().bind(bind_args("legit", "uid-legit", "n1").dump()));
      CHECK(again.at("Error") == "");
    }
  }
}
#endif
