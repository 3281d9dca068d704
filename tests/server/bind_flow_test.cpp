// filter -> prioritize -> bind over HTTP on the demo cluster: bound GPUs are taken, bind is
// idempotent for the same node and refuses anything inconsistent; concurrent binds never
// double-book a GPU.
#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <latch>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "test_server.h"

namespace gapless::test {
namespace {

const json& state_node(const json& state, const std::string& name) {
  for (const json& n : state.at("nodes")) {
    if (n.at("name") == name) return n;
  }
  FAIL("no node " << name << " in /debug/state");
  throw std::logic_error("unreachable");
}

int whole_gpus_used(const json& node) {
  int used = 0;
  for (const json& g : node.at("gpus")) used += g.at("used").at("whole").get<bool>() ? 1 : 0;
  return used;
}

bool has_error(const json& answer) {
  return !answer.at("Error").get<std::string>().empty();
}

}  // namespace

TEST_CASE("filter, prioritize, bind, filter on the demo cluster: bound GPUs are taken",
          "[server][bind]") {
  const std::vector<std::string> all = node_names(demo_cluster());
  REQUIRE(std::count(all.begin(), all.end(), "h100-nvs-01") == 1);
  TestServer srv(demo_cluster());

  const json a = gpu_pod("train-a", "uid-a", 2);
  const json f = srv.call("/filter", extender_args(a, all));
  const auto passed = f.at("NodeNames").get<std::vector<std::string>>();
  check_filter_result(f, all, passed);
  REQUIRE(std::count(passed.begin(), passed.end(), "h100-nvs-01") == 1);
  // Reasons are answered only when no node passes (kube-scheduler reads them for nothing else).
  const json g = srv.call("/filter", extender_args(a, {"gpushare-01"}));
  CHECK(g.at("NodeNames").empty());
  CHECK(g.at("FailedAndUnresolvableNodes").contains("gpushare-01"));  // no nvidia.com/gpu

  const json p = srv.call("/prioritize", extender_args(a, passed));
  REQUIRE(p.size() == passed.size());
  for (std::size_t i = 0; i < passed.size(); ++i) CHECK(p[i].at("Host") == passed[i]);

  CHECK(srv.call("/bind", bind_args("train-a", "uid-a", "h100-nvs-01")).at("Error") == "");

  const json state = json::parse(srv.state());
  REQUIRE(state.at("allocations").size() == 1);
  const json& alloc = state.at("allocations").at(0);
  CHECK(alloc.at("pod") == "default/train-a");
  CHECK(alloc.at("uid") == "uid-a");
  CHECK(alloc.at("record").at("node") == "h100-nvs-01");
  CHECK(alloc.at("record").at("gpus").size() == 2);
  CHECK(whole_gpus_used(state_node(state, "h100-nvs-01")) == 2);
  CHECK(whole_gpus_used(state_node(state, "h100-nvs-02")) == 0);

  // The binder got the same record as a pod annotation.
  const auto bindings = srv.binder().bindings();
  REQUIRE(bindings.size() == 1);
  CHECK(bindings[0].node == "h100-nvs-01");
  CHECK(json::parse(bindings[0].annotations.at("gapless.io/allocation")) == alloc.at("record"));

  // All 8 GPUs of h100-nvs-01 are no longer free; its twin still is.
  const std::vector<std::string> h100s = {"h100-nvs-01", "h100-nvs-02"};
  const json f8 = srv.call("/filter", extender_args(gpu_pod("train-b", "uid-b", 8), h100s));
  check_filter_result(f8, h100s, f8.at("NodeNames").get<std::vector<std::string>>());
  CHECK(f8.at("NodeNames") == json::array({"h100-nvs-02"}));
  const json full =
      srv.call("/filter", extender_args(gpu_pod("train-b", "uid-b", 8), {"h100-nvs-01"}));
  CHECK(full.at("FailedNodes").contains("h100-nvs-01"));

  const json f6 = srv.call("/filter", extender_args(gpu_pod("train-c", "uid-c", 6), h100s));
  CHECK(f6.at("NodeNames") == json::array({"h100-nvs-01", "h100-nvs-02"}));
}

TEST_CASE("bind is idempotent on the same node and refuses inconsistent calls", "[server][bind]") {
  TestServer srv(demo_cluster());
  const std::vector<std::string> h100s = {"h100-nvs-01", "h100-nvs-02"};
  srv.call("/filter", extender_args(gpu_pod("a", "uid-a", 2), h100s));
  REQUIRE(srv.call("/bind", bind_args("a", "uid-a", "h100-nvs-01")).at("Error") == "");
  const std::string bound = srv.state();

  SECTION("a retry for the same node succeeds and changes nothing") {
    CHECK(srv.post("/bind", bind_args("a", "uid-a", "h100-nvs-01")).body == R"({"Error":""})");
    CHECK(srv.state() == bound);
    CHECK(srv.binder().bindings().size() == 1);
  }
  SECTION("the same UID to another node is an error") {
    const json r = srv.call("/bind", bind_args("a", "uid-a", "h100-nvs-02"));
    CHECK(r.at("Error").get<std::string>().find("h100-nvs-01") != std::string::npos);
    CHECK(srv.state() == bound);
  }
  SECTION("a retry naming another pod with a bound pod's UID is an error, not idempotent") {
    const json r = srv.call("/bind", bind_args("mallory", "uid-a", "h100-nvs-01", "evil"));
    const std::string error = r.at("Error");
    CHECK(error.find("default/a") != std::string::npos);
    CHECK(error.find("evil/mallory") != std::string::npos);
    CHECK(has_error(srv.call("/bind", bind_args("a", "uid-a", "h100-nvs-01", "evil"))));
    CHECK(srv.state() == bound);
    CHECK(srv.binder().bindings().size() == 1);
  }
  SECTION("a pod never filtered is an error") {
    const json r = srv.call("/bind", bind_args("ghost", "uid-ghost", "h100-nvs-02"));
    CHECK(r.at("Error").get<std::string>().find("uid-ghost") != std::string::npos);
    CHECK(srv.state() == bound);
  }
  SECTION("PodName or PodNamespace not matching the filtered pod's UID is an error") {
    srv.call("/filter", extender_args(gpu_pod("d", "uid-d", 1), h100s));
    CHECK(has_error(srv.call("/bind", bind_args("not-d", "uid-d", "h100-nvs-02"))));
    CHECK(has_error(srv.call("/bind", bind_args("d", "uid-d", "h100-nvs-02", "other-ns"))));
    CHECK(srv.state() == bound);
    // The refused attempts did not use up the pod: the right call still binds.
    CHECK(srv.call("/bind", bind_args("d", "uid-d", "h100-nvs-02")).at("Error") == "");
  }
  SECTION("a node that cannot take the pod (any more) is an error") {
    srv.call("/filter", extender_args(gpu_pod("e", "uid-e", 8), h100s));
    CHECK(has_error(srv.call("/bind", bind_args("e", "uid-e", "h100-nvs-01"))));  // 6 free
    CHECK(has_error(srv.call("/bind", bind_args("e", "uid-e", "no-such-node"))));
    CHECK(srv.state() == bound);
    CHECK(srv.call("/bind", bind_args("e", "uid-e", "h100-nvs-02")).at("Error") == "");
  }
  SECTION("a pod without GPU resources binds (managedResources empty sends every pod)") {
    const json cpu = pod("web", "uid-web", {{"cpu", "2"}, {"memory", "1Gi"}});
    srv.call("/filter", extender_args(cpu, h100s));
    CHECK(srv.call("/bind", bind_args("web", "uid-web", "h100-nvs-01")).at("Error") == "");
    CHECK(srv.binder().bindings().size() == 2);
    // It holds no GPU and gets no record; its CPU and memory are counted on the node (scoring
    // reads them).
    const json after = json::parse(srv.state());
    CHECK(after.at("allocations") == json::parse(bound).at("allocations"));
    for (const json& n : after.at("nodes")) {
      if (n.at("name") != "h100-nvs-01") continue;
      CHECK(n.at("host").at("usedCpuMilli") == 2000);
      CHECK(n.at("host").at("usedMemoryMiB") == 1024);
    }
  }
}

TEST_CASE("16 concurrent filter+bind for 8 free GPUs: exactly 8 win, no GPU twice",
          "[server][bind][concurrency]") {
  TestServer srv(cluster_of(json::array({gfd_node("h100-solo", 8)})));
  constexpr int kPods = 16;
  std::vector<std::string> errors(kPods);
  std::vector<int> answered(kPods, 0);
  std::latch start(kPods);
  std::vector<std::thread> threads;
  for (int i = 0; i < kPods; ++i) {
    threads.emplace_back([&, i] {
      const std::string name = "pod-" + std::to_string(i);
      const std::string uid = "uid-" + std::to_string(100 + i);
      httplib::Client c = srv.client();
      start.arrive_and_wait();
      auto f = c.Post("/filter", extender_args(gpu_pod(name, uid, 1), {"h100-solo"}),
                      "application/json");
      auto b = c.Post("/bind", bind_args(name, uid, "h100-solo"), "application/json");
      if (!f || !b || f->status != 200 || b->status != 200) {
        errors[i] = "no answer: filter " + httplib::to_string(f.error()) + ", bind " +
                    httplib::to_string(b.error());
        return;
      }
      const json answer = json::parse(b->body, nullptr, /*allow_exceptions=*/false);
      if (!answer.is_object() || !answer.contains("Error")) return;
      errors[i] = answer["Error"].get<std::string>();
      answered[i] = 1;
    });
  }
  for (std::thread& t : threads) t.join();

  for (int i = 0; i < kPods; ++i) {
    INFO("pod-" << i << ": " << errors[i]);
    CHECK(answered[i] == 1);
  }
  const auto wins = std::count(errors.begin(), errors.end(), "");
  CHECK(wins == 8);

  const json state = json::parse(srv.state());
  REQUIRE(state.at("allocations").size() == 8);
  std::set<int> indices;
  for (const json& a : state.at("allocations")) {
    CHECK(a.at("record").at("node") == "h100-solo");
    REQUIRE(a.at("record").at("gpus").size() == 1);
    indices.insert(a.at("record").at("gpus").at(0).at("index").get<int>());
  }
  CHECK(indices == std::set<int>{0, 1, 2, 3, 4, 5, 6, 7});
  CHECK(whole_gpus_used(state_node(state, "h100-solo")) == 8);
  CHECK(srv.binder().bindings().size() == 8);
}

}  // namespace gapless::test
