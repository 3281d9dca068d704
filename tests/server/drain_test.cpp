// The drain reservation through the extender's verbs: a pod whose filter finds no node is
// recorded as waiting; once kube-scheduler retries it, other pods' filters keep its drain target
// from them; binding the waiting pod there lets the target go.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "test_server.h"

namespace gapless::test {
namespace {

const std::vector<std::string> kNodes = {"n-a", "n-b", "n-c"};

// Three 8-GPU nodes holding 6, 3 and 5 one-GPU pods ("<node>-<i>"), bound through the server.
model::Cluster three_nodes() {
  return cluster_of(json::array({gfd_node("n-a", 8), gfd_node("n-b", 8), gfd_node("n-c", 8)}));
}

void fill(const TestServer& srv, const std::string& node, int n) {
  for (int i = 0; i < n; ++i) {
    const std::string name = node + "-" + std::to_string(i);
    REQUIRE(srv.filter_and_bind(gpu_pod(name, "uid-" + name, 1), node) == "");
  }
}

json filter(const TestServer& srv, const json& pod_json) {
  const json f = srv.call("/filter", extender_args(pod_json, kNodes));
  INFO(f.dump());
  REQUIRE(f.at("Error") == "");
  return f;
}

bool passes(const json& f, const std::string& node) {
  if (!f.at("NodeNames").is_array()) return false;
  for (const json& n : f.at("NodeNames")) {
    if (n == node) return true;
  }
  return false;
}

}  // namespace

TEST_CASE("a waiting pod's drain target is kept from other pods until it binds there",
          "[server][drain]") {
  TestServer srv(three_nodes());  // the built-in policy: drain.minGpus 2
  fill(srv, "n-a", 6);
  fill(srv, "n-b", 3);
  fill(srv, "n-c", 5);
  const json big = gpu_pod("big", "uid-big", 8);

  // Filter finds no node: recorded; kube-scheduler's retry finds it waiting again.
  const auto gauges = [&] {
    const std::string text = srv.get("/metrics").body;
    return std::pair{metric_sample(text, "gapless_waiting_pods"),
                     metric_sample(text, "gapless_drain_reserved_nodes")};
  };
  CHECK(gauges() == std::pair{0.0, 0.0});
  CHECK(filter(srv, big).at("NodeNames").empty());
  CHECK(srv.extender().scheduler().waiting() == 1);
  CHECK_FALSE(srv.extender().scheduler().drain());
  CHECK(gauges() == std::pair{1.0, 0.0});
  CHECK(filter(srv, big).at("NodeNames").empty());
  const auto held = srv.extender().scheduler().drain();
  REQUIRE(held);
  CHECK(gauges() == std::pair{1.0, 1.0});
  CHECK(held->pod_uid == "uid-big");
  CHECK(held->node == "n-b");  // 3 GPUs in use: the closest to taking it

  // Another pod's filter: n-b does not pass for it.
  const json other = filter(srv, gpu_pod("other", "uid-other", 1));
  CHECK_FALSE(passes(other, "n-b"));
  CHECK(passes(other, "n-a"));
  // Where n-b is all it could have, n-b is unresolvable (preemption must not empty it for others).
  const json only = srv.call("/filter", extender_args(gpu_pod("other", "uid-other", 1), {"n-b"}));
  CHECK(only.at("NodeNames").empty());
  const std::string why = only.at("FailedAndUnresolvableNodes").at("n-b");
  CHECK(why.find("drain") != std::string::npos);

  // n-b drains (its pods leave, as the pod informer reports).
  srv.extender().mutate([](model::Cluster& c) {
    for (int i = 0; i < 3; ++i) REQUIRE(c.release("uid-n-b-" + std::to_string(i)));
  });
  const json now = filter(srv, big);
  CHECK(now.at("NodeNames") == json::array({"n-b"}));
  CHECK(srv.call("/bind", bind_args("big", "uid-big", "n-b")).at("Error") == "");
  CHECK_FALSE(srv.extender().scheduler().drain());
  CHECK(srv.extender().scheduler().waiting() == 0);
  CHECK(gauges() == std::pair{0.0, 0.0});
}

TEST_CASE("a pod that fails filter once holds nothing; small pods are never recorded",
          "[server][drain]") {
  TestServer srv(three_nodes());
  fill(srv, "n-a", 6);
  fill(srv, "n-b", 3);
  fill(srv, "n-c", 5);
  CHECK(filter(srv, gpu_pod("big", "uid-big", 8)).at("NodeNames").empty());
  CHECK(passes(filter(srv, gpu_pod("other", "uid-other", 1)), "n-b"));
  // Fill every GPU: a 1-GPU pod that fits nowhere is not recorded.
  REQUIRE(srv.filter_and_bind(gpu_pod("rest-a", "uid-rest-a", 2), "n-a") == "");
  REQUIRE(srv.filter_and_bind(gpu_pod("rest-b", "uid-rest-b", 5), "n-b") == "");
  REQUIRE(srv.filter_and_bind(gpu_pod("rest-c", "uid-rest-c", 3), "n-c") == "");
  CHECK(filter(srv, gpu_pod("late", "uid-late", 1)).at("NodeNames").empty());
  CHECK(filter(srv, gpu_pod("late", "uid-late", 1)).at("NodeNames").empty());
  CHECK(srv.extender().scheduler().waiting() == 1);  // big only
}

TEST_CASE("a room consolidation holds shows in /debug/state, the GPU map and /metrics",
          "[server][drain][consolidation]") {
  TestServer srv(three_nodes());
  fill(srv, "n-b", 3);
  const auto held_rooms = [&] {
    return metric_sample(srv.get("/metrics").body, "gapless_consolidation_held_rooms");
  };
  const auto state = [&] { return json::parse(srv.get("/debug/state").body); };
  const auto map = [&] { return json::parse(srv.get("/ui/map.json").body); };
  CHECK(held_rooms() == 0.0);
  CHECK(state().at("roomHolds") == json::array());
  CHECK(map().at("holds") == json::array());

  // What the consolidation driver does once it evicts a plan's pods: n-b is kept for "big".
  model::PodInfo big;
  big.ns = "ml";
  big.name = "big";
  big.uid = "uid-big";
  placement::ConsolidationPlan plan;
  plan.node = "n-b";
  for (const char* uid : {"uid-n-b-0", "uid-gone"}) {  // the second no longer in the model
    placement::PlannedMove m;
    m.pod_uid = uid;
    m.from = "n-b";
    m.to = "n-c";
    plan.moves.push_back(m);
  }
  srv.extender().scheduler().hold_room(big, plan, 0.0);

  CHECK(held_rooms() == 1.0);
  const json holds = state().at("roomHolds");
  REQUIRE(holds.size() == 1);
  CHECK(holds[0].at("pod") == "uid-big");
  CHECK(holds[0].at("node") == "n-b");
  CHECK(holds[0].at("evictedTerminating") == json::array({"uid-n-b-0"}));
  CHECK(holds[0].at("holdSeconds") == 60.0);  // the built-in policy's consolidation.holdSeconds
  CHECK(map().at("holds") == json::array({{{"uid", "uid-big"}, {"node", "n-b"}}}));

  REQUIRE(srv.extender().scheduler().release_room("uid-big"));
  CHECK(held_rooms() == 0.0);
  CHECK(state().at("roomHolds") == json::array());
  CHECK(map().at("holds") == json::array());
}

}  // namespace gapless::test
