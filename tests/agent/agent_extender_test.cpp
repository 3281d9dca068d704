// End to end, as a cluster runs it: gapless-agent on a (fake NVML) DGX-1 publishes the node's
// topology to the API server, the extender's informers pick it up, and the extender's filter and
// bind make an NVLink-aware placement that GPU Feature Discovery labels alone cannot (a test in
// nvlink_choice_test.cpp shows the labels' side). Then an XID 79 on one GPU reaches the extender
// the same way and that GPU is no longer handed out.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <atomic>
#include <fstream>
#include <thread>

#include "eventually.h"
#include "fake_api_server.h"
#include "fake_nvml.h"
#include "gapless/agent/agent.h"
#include "gapless/k8s/allocation_record.h"
#include "kube_extender.h"
#include "temp_dir.h"

namespace {

using namespace gapless;
using gapless::test::eventually;
using nlohmann::json;
using namespace std::chrono_literals;

json gpu_pod(const std::string& name, int gpus, const std::string& topology) {
  return {{"metadata",
           {{"name", name},
            {"namespace", "ml"},
            {"uid", "uid-" + name},
            {"annotations", {{"gapless.io/topology", topology}}}}},
          {"spec",
           {{"containers",
             json::array(
                 {{{"name", "c"},
                   {"resources", {{"limits", {{"nvidia.com/gpu", std::to_string(gpus)}}}}}}})}}}};
}

std::string args(const json& pod) {
  return json{{"Pod", pod}, {"Nodes", nullptr}, {"NodeNames", json::array({"gpu-1"})}}.dump();
}

json gpus_in_state(server::Extender& e) {
  const json state = json::parse(e.debug_state());
  for (const json& n : state.at("nodes")) {
    if (n.at("name") == "gpu-1") return n.at("gpus");
  }
  return json::array();
}

}  // namespace

TEST_CASE("agent -> API server -> extender: an NVLink pair, then a GPU lost to XID 79 is skipped",
          "[agent][e2e]") {
  test::TempDir dir;
  const std::string events = dir.write("events", "");
  test::FakeApiServer api;
  api.add_node({{"metadata", {{"name", "gpu-1"}}}});
  test::configure_fake_nvml(test::nvml_fixture("dgx1-v100"), events);

  k8s::ApiClient agent_client(api.client_config());
  agent::NodePublisher publisher(agent_client, "gpu-1");
  agent::AgentMetrics agent_metrics;
  agent::AgentOptions o;
  o.nvml_library = GAPLESS_FAKE_NVML;
  o.poll_interval = 30s;
  agent::Agent a(o, &publisher, agent_metrics, [](const std::string&) {});
  struct Running {  // the agent's loop, stopped however the test ends
    agent::Agent& agent;
    std::atomic<bool> stop{false};
    std::thread thread{[this] { agent.run(stop); }};
    ~Running() {
      stop = true;
      thread.join();
    }
  } running{a};
  // As the API server holds them: bind checks the /filter body against these (issue 38).
  api.add_pod(gpu_pod("pair", 2, "nvlink-required"));
  api.add_pod(gpu_pod("six", 6, "none"));
  api.add_pod(gpu_pod("one", 1, "none"));

  test::KubeExtender live(api);
  server::Extender& e = live.extender();
  REQUIRE(eventually([&] { return e.ready() && gpus_in_state(e).size() == 8; }, 10s));

  // A 2-GPU pod that needs NVLink between its GPUs: only the agent's topology can say where.
  const json f = json::parse(e.filter(args(gpu_pod("pair", 2, "nvlink-required"))));
  REQUIRE(f.at("Error") == "");
  REQUIRE(f.at("NodeNames") == json::array({"gpu-1"}));
  const json b = json::parse(e.bind(
      json{{"PodName", "pair"}, {"PodNamespace", "ml"}, {"PodUID", "uid-pair"}, {"Node", "gpu-1"}}
          .dump()));
  REQUIRE(b.at("Error") == "");
  std::vector<int> pair;
  e.mutate([&](model::Cluster& c) {
    const model::Allocation* held = c.allocation("uid-pair");
    REQUIRE(held != nullptr);
    for (const auto& g : held->gpus) pair.push_back(g.index);
    const model::Node* node = c.find_node("gpu-1");
    REQUIRE(pair.size() == 2);
    CHECK(node->links.get(pair[0], pair[1]).is_nvlink());
  });

  // GPU 3 falls off the bus: the agent publishes it unhealthy, the informer brings it in.
  std::ofstream(events, std::ios::app) << "xid 3 79\n";
  REQUIRE(eventually([&] { return gpus_in_state(e).at(3).at("healthy") == false; }, 10s));
  // Six healthy GPUs are left free; a 6-GPU pod gets exactly those, never GPU 3.
  const json six = gpu_pod("six", 6, "none");
  REQUIRE(json::parse(e.filter(args(six))).at("NodeNames") == json::array({"gpu-1"}));
  REQUIRE(
      json::parse(
          e.bind(json{
              {"PodName", "six"}, {"PodNamespace", "ml"}, {"PodUID", "uid-six"}, {"Node", "gpu-1"}}
                     .dump()))
          .at("Error") == "");
  e.mutate([&](model::Cluster& c) {
    for (const auto& g : c.allocation("uid-six")->gpus) CHECK(g.index != 3);
  });
  // Nothing is left for even one more GPU: the unhealthy one is not offered.
  const json one = json::parse(e.filter(args(gpu_pod("one", 1, "none"))));
  CHECK(one.at("NodeNames") == json::array());
}
