// The watch stream recorded in the protocol notes (tests/fixtures/extender/
// watch-events-nodes.jsonl), through an Informer into ClusterSync.
#include <catch2/catch.hpp>

#include <sstream>
#include <thread>

#include "gapless/k8s/cluster_sync.h"
#include "gapless/k8s/informer.h"
#include "scripted_transport.h"
#include "test_paths.h"

using gapless::k8s::ClusterSync;
using gapless::k8s::ClusterSyncHooks;
using gapless::k8s::Informer;
using gapless::k8s::InformerOptions;
using gapless::k8s::testing::eventually;
using gapless::k8s::testing::list_page;
using gapless::k8s::testing::ScriptedTransport;
using gapless::k8s::testing::stream;
using gapless::model::Cluster;
using nlohmann::json;

TEST_CASE("informer: the recorded node stream drives the model", "[k8s][informer][sync]") {
  std::vector<json> events;
  std::istringstream in(gapless::test::fixture_text("extender/watch-events-nodes.jsonl"));
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) events.push_back(json::parse(line));
  }
  REQUIRE(events.size() == 5);
  REQUIRE(events.back()["type"] == "ERROR");
  const json h100 = events[1]["object"];  // its latest state
  json mig = events[3]["object"];         // deleted in the stream
  mig["metadata"]["resourceVersion"] = "1849000";

  ScriptedTransport api;
  api.push_call(list_page("1849000", {mig}));
  api.push_watch(stream(events));  // ... ends with 410 Gone
  api.push_call(list_page("1851230", {h100}));

  std::mutex mu;
  Cluster cluster;
  ClusterSyncHooks hooks;
  hooks.mutate = [&](const std::function<void(Cluster&)>& f) {
    std::lock_guard lock(mu);
    f(cluster);
  };
  ClusterSync sync(hooks);
  InformerOptions o;
  o.path = "/api/v1/nodes";
  Informer informer(api, o, sync.node_handlers());
  std::thread thread([&] { informer.run(); });
  REQUIRE(eventually([&] { return api.requests_of("watch").size() == 2; }));
  informer.stop();
  api.close();
  thread.join();

  auto watches = api.requests_of("watch");
  CHECK(watches[0].path.find("resourceVersion=1849000&") != std::string::npos);
  CHECK(watches[1].path.find("resourceVersion=1851230&") != std::string::npos);
  CHECK(api.requests_of("call").size() == 2);
  std::lock_guard lock(mu);
  REQUIRE(cluster.node_count() == 1);
  const auto* node = cluster.find_node("gpu-h100-01");
  REQUIRE(node != nullptr);
  CHECK_FALSE(node->gpus.empty());
}
