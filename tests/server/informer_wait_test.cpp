// The drain reservation in a cluster: kube-scheduler never calls the extender's filter for a pod
// its own count of nvidia.com/gpu finds no room for, but it marks the pod PodScheduled=False /
// Unschedulable. The pod informer sees that, the pod waits and holds a drain target without
// ever being filtered, and the target goes when the pod does.
#if __has_include("fake_api_server.h")
#include <catch2/catch.hpp>

#include "../k8s/k8s_objects.h"
#include "eventually.h"
#include "fake_api_server.h"
#include "gapless/server/extender.h"
#include "kube_extender.h"

using namespace gapless;
using nlohmann::json;

namespace {

// Three 8-GPU nodes with 6, 3 and 5 GPUs held by bound pods (Gapless records).
void load_cluster(test::FakeApiServer& server) {
  using k8s::testing::bound_pod;
  using k8s::testing::topology_node;
  using k8s::testing::whole;
  server.load({topology_node("n-a", 8), topology_node("n-b", 8), topology_node("n-c", 8)},
              {bound_pod(whole("held-a", "n-a", {0, 1, 2, 3, 4, 5})),
               bound_pod(whole("held-b", "n-b", {0, 1, 2})),
               bound_pod(whole("held-c", "n-c", {0, 1, 2, 3, 4}))});
}

// A pending pod of gapless-scheduler asking 8 GPUs, as kube-scheduler leaves it after an
// attempt that found no node.
json unschedulable_big() {
  json p = k8s::testing::pod_object("big", "uid-big", "");
  p["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "8";
  p["spec"]["schedulerName"] = "gapless-scheduler";
  p["status"]["conditions"] =
      json::array({{{"type", "PodScheduled"},
                    {"status", "False"},
                    {"reason", "Unschedulable"},
                    {"message", "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."},
                    {"lastTransitionTime", "2026-01-01T10:00:00Z"}}});
  return p;
}

json state(test::KubeExtender& live) {
  return json::parse(live.extender().debug_state());
}

bool drain_is(test::KubeExtender& live, const json& want) {
  const json s = state(live);
  return s.at("drain") == want;
}

// Another pod's filter over `nodes` (the three by default).
json filter_other(test::KubeExtender& live,
                  const std::vector<std::string>& nodes = {"n-a", "n-b", "n-c"}) {
  const json pod = k8s::testing::pod_object("other", "uid-other", "");
  return json::parse(
      live.extender().filter(json{{"Pod", pod}, {"Nodes", nullptr}, {"NodeNames", nodes}}.dump()));
}

const json kHeld = {{"pod", "uid-big"}, {"node", "n-b"}};

}  // namespace

TEST_CASE("an Unschedulable pod never filtered holds a drain target until it is deleted",
          "[server][k8s][drain]") {
  test::FakeApiServer server;
  load_cluster(server);
  test::KubeExtender live(server);  // the built-in policy: drain.minGpus 2
  REQUIRE(test::eventually([&] { return live.extender().ready(); }));
  CHECK(state(live).at("waiting") == 0);
  CHECK(state(live).at("drain").is_null());

  server.add_pod(unschedulable_big());
  // n-b has 3 GPUs in use: the closest to taking it.
  REQUIRE(test::eventually([&] { return drain_is(live, kHeld); }));
  CHECK(state(live).at("waiting") == 1);

  const json f = filter_other(live);
  INFO(f.dump());
  CHECK(f.at("NodeNames") == json::array({"n-a", "n-c"}));
  // Reasons come only when no node passes: n-b alone is unresolvable, for the drain.
  const json only = filter_other(live, {"n-b"});
  INFO(only.dump());
  const std::string why = only.at("FailedAndUnresolvableNodes").at("n-b");
  CHECK(why.find("drain") != std::string::npos);

  SECTION("deleted: the target goes") {
    server.delete_pod("ml", "big");
    REQUIRE(test::eventually([&] { return drain_is(live, nullptr); }));
    CHECK(state(live).at("waiting") == 0);
    CHECK(filter_other(live).at("NodeNames") == json::array({"n-a", "n-b", "n-c"}));
  }
  SECTION("bound by someone else, without a record: the target goes") {
    REQUIRE(server.bind_pod("ml", "big", "n-b") == 201);
    REQUIRE(test::eventually([&] { return drain_is(live, nullptr); }));
    CHECK(state(live).at("waiting") == 0);
  }
  SECTION("a restarted extender finds the pod waiting on its first list") {
    test::KubeExtender restarted(server);
    REQUIRE(test::eventually([&] { return restarted.extender().ready(); }));
    REQUIRE(test::eventually([&] { return drain_is(restarted, kHeld); }));
  }
}

TEST_CASE("a default-scheduler pod is not ours to wait for", "[server][k8s][drain]") {
  test::FakeApiServer server;
  load_cluster(server);
  json other = unschedulable_big();
  other["spec"]["schedulerName"] = "default-scheduler";
  other["metadata"]["name"] = "not-ours";
  other["metadata"]["uid"] = "uid-not-ours";
  server.add_pod(other);
  server.add_pod(unschedulable_big());  // both come in the first list
  test::KubeExtender live(server);
  REQUIRE(test::eventually([&] { return drain_is(live, kHeld); }));
  CHECK(state(live).at("waiting") == 1);
}
#endif
