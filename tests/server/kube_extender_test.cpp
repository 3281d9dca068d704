// The extender wired to Kubernetes as gapless-extender runs it: informers feed the model, binds go
// through KubeBinder to the fake API server. Checks the two promises platform teams rely on:
// concurrent binds never double-book a GPU, and a restart rebuilds exactly the same model.
#if __has_include("fake_api_server.h")
#include <catch2/catch.hpp>

#include <atomic>
#include <set>
#include <thread>

#include "../k8s/k8s_objects.h"
#include "fake_api_server.h"
#include "gapless/server/extender.h"
#include "kube_extender.h"

using namespace gapless;
using namespace std::chrono_literals;
using nlohmann::json;

namespace {

std::string args_for(const json& pod, const std::string& node) {
  return json{{"Pod", pod}, {"Nodes", nullptr}, {"NodeNames", {node}}}.dump();
}

}  // namespace

TEST_CASE("64 concurrent binds race for 8 GPUs through the API server: no double booking",
          "[server][k8s]") {
  test::FakeApiServer server;
  std::vector<json> pods;
  for (int i = 0; i < 64; ++i) {
    pods.push_back(
        k8s::testing::pod_object("p" + std::to_string(i), "uid-" + std::to_string(i), ""));
  }
  server.load({k8s::testing::topology_node("n1", 8)}, pods);

  test::KubeExtender live(server);
  REQUIRE(live.wait([&] { return live.extender().ready(); }));

  std::atomic<int> bound{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 64; ++i) {
    threads.emplace_back([&, i] {
      const json f = json::parse(live.extender().filter(args_for(pods[i], "n1")));
      if (f.at("Error") != "") return;
      const json b = json::parse(live.extender().bind(json{
          {"PodName", "p" + std::to_string(i)},
          {"PodNamespace", "ml"},
          {"PodUID", "uid-" + std::to_string(i)},
          {"Node", "n1"}}.dump()));
      if (b.at("Error") == "") ++bound;
    });
  }
  for (auto& t : threads) t.join();

  CHECK(bound == 8);
  const auto bindings = server.bindings();
  REQUIRE(bindings.size() == 8);
  std::set<int> gpus;
  for (const json& b : bindings) {
    const auto record = json::parse(
        b.at("metadata").at("annotations").at("gapless.io/allocation").get<std::string>());
    for (const json& g : record.at("gpus")) gpus.insert(g.at("index").get<int>());
  }
  CHECK(gpus.size() == 8);  // eight binds, eight different GPUs
  CHECK(live.allocations() == 8);

  SECTION("a restart rebuilds exactly the same model from the pods' records") {
    // Let the first extender see its own binds come back as pod updates first.
    REQUIRE(live.wait([&] {
      int seen = 0;
      for (int i = 0; i < 64; ++i) {
        auto p = server.pod("ml", "p" + std::to_string(i));
        if (p && p->at("spec").contains("nodeName")) ++seen;
      }
      return seen == 8;
    }));
    const std::string before = live.extender().debug_state();
    test::KubeExtender restarted(server);
    REQUIRE(restarted.wait([&] { return restarted.extender().ready(); }));
    CHECK(restarted.extender().debug_state() == before);
    CHECK(restarted.allocations() == 8);
  }
}
#endif
