// KubeBinder::admit on its own against the fake API server, without informers (the node is read
// per bind): the cases the end-to-end attack test (tests/server/bind_trust_test.cpp) does not
// reach through the extender.
#if __has_include("fake_api_server.h")
#include <catch2/catch.hpp>

#include "fake_api_server.h"
#include "gapless/k8s/api_client.h"
#include "gapless/k8s/kube_binder.h"
#include "gapless/k8s/unbound_pods.h"
#include "k8s_objects.h"

using namespace gapless;
using nlohmann::json;

namespace {

k8s::BindRequest to(const std::string& name, const std::string& uid, const std::string& node) {
  return k8s::BindRequest{"ml", name, uid, node, {}};
}

k8s::ParsedPod filtered(const json& pod) {
  auto parsed = k8s::parse_pod(pod);
  REQUIRE(parsed);
  return *parsed;
}

}  // namespace

TEST_CASE("admit: the API server's pod, read when no informer is given", "[k8s][bind_trust]") {
  test::FakeApiServer server;
  json tainted = k8s::testing::topology_node("n1", 4);
  tainted["spec"]["taints"] = {{{"key", "gpu"}, {"effect", "NoExecute"}}};
  server.add_node(tainted);
  server.add_node(k8s::testing::topology_node("n2", 4));
  const json elsewhere = k8s::testing::pod_object("elsewhere", "uid-e", "n2");
  const json here = k8s::testing::pod_object("here", "uid-h", "n1");
  const json pending = k8s::testing::pod_object("pending", "uid-p", "");
  server.add_pod(elsewhere);
  server.add_pod(here);
  server.add_pod(pending);
  k8s::ApiClient api(server.client_config());
  k8s::KubeBinder binder(api);

  SECTION("bound to another node: refused") {
    auto r = binder.admit(to("elsewhere", "uid-e", "n1"), filtered(elsewhere));
    REQUIRE_FALSE(r);
    CHECK(r.error() == "gapless: pod ml/elsewhere is already bound to node n2");
    CHECK(server.events().size() == 1);
  }
  SECTION("already on this node (a retry): admitted, even on a taint added since") {
    auto r = binder.admit(to("here", "uid-h", "n1"), filtered(here));
    REQUIRE(r);
    CHECK(r->info.node == "n1");
    CHECK(server.events().empty());
  }
  SECTION("the node's taints are read from the API server") {
    auto r = binder.admit(to("pending", "uid-p", "n1"), filtered(pending));
    REQUIRE_FALSE(r);
    CHECK(r.error() == "gapless: pod ml/pending does not tolerate taint gpu:NoExecute of node n1");
    CHECK(binder.admit(to("pending", "uid-p", "n2"), filtered(pending)));
  }
  SECTION("a node that does not exist") {
    auto r = binder.admit(to("pending", "uid-p", "n9"), filtered(pending));
    REQUIRE_FALSE(r);
    CHECK(r.error() ==
          "gapless: pod ml/pending cannot be checked against node n9: the API server has no such "
          "node");
  }
  SECTION("a pod that does not exist: refused, no Event") {
    auto r = binder.admit(to("ghost", "uid-g", "n2"), filtered(pending));
    REQUIRE_FALSE(r);
    CHECK(r.error() == "gapless: pod ml/ghost does not exist in the API server");
    CHECK(server.events().empty());
  }
  SECTION("the API server unreachable: refused, retried by kube-scheduler") {
    server.fail_next("GET", "/api/v1/namespaces/ml/pods/pending", 1, 503, "overloaded");
    auto r = binder.admit(to("pending", "uid-p", "n2"), filtered(pending));
    REQUIRE_FALSE(r);
    CHECK_THAT(r.error(), Catch::Contains("overloaded") && Catch::EndsWith("will retry the pod"));
  }
  SECTION("the node informer's facts, when given, are used without a read") {
    k8s::NodeFactsStore store;
    json untainted = tainted;
    untainted["spec"].erase("taints");
    store.replace({untainted});  // what the informer saw last
    binder.set_node_facts(&store);
    server.clear_log();
    CHECK(binder.admit(to("pending", "uid-p", "n1"), filtered(pending)));
    CHECK(server.count_requests("GET", "/api/v1/nodes") == 0);
    CHECK(server.count_requests("GET", "/api/v1/namespaces/ml/pods/pending") == 1);
  }
}

TEST_CASE("admit: the pod informer's copy of the pod, when it has the bind's UID, without a read",
          "[k8s][bind_trust]") {
  test::FakeApiServer server;
  server.add_node(k8s::testing::topology_node("n1", 4));
  json labelled = k8s::testing::topology_node("n2", 4);
  labelled["metadata"]["labels"] = {{"pool", "train"}};
  server.add_node(labelled);
  json pending = k8s::testing::pod_object("pending", "uid-p", "");
  pending["spec"]["nodeSelector"] = {{"pool", "train"}};
  server.add_pod(pending);
  k8s::ApiClient api(server.client_config());
  k8s::KubeBinder binder(api);
  k8s::NodeFactsStore nodes;
  nodes.replace({k8s::testing::topology_node("n1", 4), labelled});
  binder.set_node_facts(&nodes);
  k8s::UnboundPodStore pods;
  binder.set_unbound_pods(&pods);
  const std::string pod_path = "/api/v1/namespaces/ml/pods/pending";
  // Binding the pod to n1, which lacks its nodeSelector's label: refused, with one Event.
  auto refused_to_n1 = [&] {
    auto r = binder.admit(to("pending", "uid-p", "n1"), filtered(pending));
    REQUIRE_FALSE(r);
    CHECK(r.error() ==
          "gapless: pod ml/pending has nodeSelector pool=train, which node n1 does not match (it "
          "has no label pool)");
    std::size_t events = 0;
    for (const json& e : server.events()) events += e.value("reason", "") == "FailedBinding";
    CHECK(events == 1);
  };

  SECTION("known: admitted and refused from the informer's copy, with no read of the pod") {
    pods.replace({pending});
    server.clear_log();
    auto ok = binder.admit(to("pending", "uid-p", "n2"), filtered(pending));
    REQUIRE(ok);
    CHECK(ok->info.uid == "uid-p");
    refused_to_n1();
    CHECK(server.count_requests("GET", pod_path) == 0);
    CHECK(server.count_requests("GET", "/api/v1/nodes") == 0);
  }
  SECTION("known: other GPU requests than the filter body's are refused without a read") {
    pods.replace({pending});
    json bigger = pending;
    bigger["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "2";
    server.clear_log();
    auto r = binder.admit(to("pending", "uid-p", "n2"), filtered(bigger));
    REQUIRE_FALSE(r);
    CHECK_THAT(r.error(), Catch::Contains("other GPU resources than the /filter body said"));
    CHECK(server.count_requests("GET", pod_path) == 0);
  }
  SECTION("unknown to the informer (created a moment ago): read, and refused by its nodeSelector") {
    pods.replace({});
    server.clear_log();
    refused_to_n1();
    CHECK(server.count_requests("GET", pod_path) == 1);
  }
  SECTION("the informer's copy under another UID: read, and judged by the API server's pod") {
    json older = pending;
    older["metadata"]["uid"] = "uid-old";
    older["spec"].erase("nodeSelector");  // the pod of that name before, which fit n1
    pods.replace({older});
    server.clear_log();
    auto r = binder.admit(to("pending", "uid-p", "n1"), filtered(pending));
    REQUIRE_FALSE(r);
    CHECK_THAT(r.error(), Catch::Contains("has nodeSelector pool=train"));
    CHECK(server.count_requests("GET", pod_path) == 1);
  }
  SECTION("a copy the informer has not updated yet: the API server refuses its Binding") {
    // The pod was deleted and created again (uid-p), or bound elsewhere, after the informer's
    // copy (uid-old, unbound): a bind that names the copy's UID passes admit, and the Binding
    // carries that UID as a precondition and needs an unbound pod, so nothing is bound.
    json older = pending;
    older["metadata"]["uid"] = "uid-old";
    pods.replace({older});
    REQUIRE(binder.admit(to("pending", "uid-old", "n2"), filtered(older)));
    Status s = binder.bind(to("pending", "uid-old", "n2"));
    REQUIRE_FALSE(s.ok());
    CHECK_THAT(s.error(), Catch::Contains("UID in precondition: uid-old"));
    REQUIRE(server.bind_pod("ml", "pending", "n1", {}, "uid-p") == 201);  // another binder
    pods.replace({pending});  // the informer has not seen that bind
    REQUIRE(binder.admit(to("pending", "uid-p", "n2"), filtered(pending)));
    s = binder.bind(to("pending", "uid-p", "n2"));
    REQUIRE_FALSE(s.ok());
    CHECK_THAT(s.error(), Catch::Contains("already assigned to node"));
    CHECK(server.pod("ml", "pending")->at("spec").at("nodeName") == "n1");
  }
  SECTION("bound since, as the informer saw: dropped from it, so read and refused") {
    pods.replace({pending});
    const json elsewhere = k8s::testing::pod_object("elsewhere", "uid-e", "n2");
    pods.apply("ADDED", k8s::testing::pod_object("elsewhere", "uid-e", ""));
    pods.apply("MODIFIED", elsewhere);
    server.add_pod(elsewhere);
    server.clear_log();
    auto r = binder.admit(to("elsewhere", "uid-e", "n1"), filtered(elsewhere));
    REQUIRE_FALSE(r);
    CHECK(r.error() == "gapless: pod ml/elsewhere is already bound to node n2");
    CHECK(server.count_requests("GET", "/api/v1/namespaces/ml/pods/elsewhere") == 1);
  }
}
#endif
