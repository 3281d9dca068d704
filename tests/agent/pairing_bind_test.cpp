// The bind gate in the extender (docs/node-pairing.md), wired to the fake API server as
// gapless-extender runs it: a bind alike to a pod on its node that is not allocated yet waits,
// goes when the device plugin's gapless.io/allocated reaches the pod informer, and gives up
// with the pairing Error after --pairing-wait.
#if __has_include("fake_api_server.h")
#include <catch2/catch.hpp>

#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>

#include "../k8s/k8s_objects.h"
#include "fake_api_server.h"
#include "gapless/server/extender.h"
#include "kube_extender.h"

using namespace gapless;
using namespace std::chrono_literals;
using nlohmann::json;

namespace {

// One asynchronous answer, waited for with a condition (no sleeps).
class Answer {
 public:
  std::function<void(std::string)> sink() {
    return [this](std::string a) {
      std::lock_guard lock(mu_);
      ++calls_;
      answer_ = std::move(a);
      cv_.notify_all();
    };
  }
  std::optional<std::string> wait(std::chrono::milliseconds limit) {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, limit, [&] { return answer_.has_value(); });
    return answer_;
  }
  bool answered() {
    std::lock_guard lock(mu_);
    return answer_.has_value();
  }
  int calls() {
    std::lock_guard lock(mu_);
    return calls_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::optional<std::string> answer_;
  int calls_ = 0;
};

std::string bind_body(const std::string& name, const std::string& node = "n1") {
  return json{{"PodName", name}, {"PodNamespace", "ml"}, {"PodUID", "uid-" + name}, {"Node", node}}
      .dump();
}

// A node known from NVIDIA's GPU feature discovery labels: no gapless-agent, another plugin.
json gfd_node(const std::string& name) {
  return {
      {"kind", "Node"},
      {"apiVersion", "v1"},
      {"metadata",
       {{"name", name},
        {"resourceVersion", "1"},
        {"labels",
         {{"nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"}, {"nvidia.com/gpu.count", "8"}}}}},
      {"status", {{"allocatable", {{"nvidia.com/gpu", "8"}}}}}};
}

// What n1 and n2 look like: by default gapless-agent's topology annotation and its device plugin
// registered (the only nodes the gate holds binds for).
using NodeMaker = std::function<json(const std::string& name)>;
json gapless_plugin_node(const std::string& name) {
  return k8s::testing::with_gapless_plugin(k8s::testing::topology_node(name, 8), 8);
}

struct Rig {
  explicit Rig(server::PairingOptions o, const NodeMaker& node_of = gapless_plugin_node) {
    std::vector<json> pods;
    for (const char* name : {"a", "b", "c"}) {
      pods.push_back(k8s::testing::pod_object(name, std::string("uid-") + name, ""));
    }
    server.load({node_of("n1"), node_of("n2")}, pods);
    live = std::make_unique<test::KubeExtender>(server, "", o);
    REQUIRE(live->wait([&] { return live->extender().ready(); }));
    for (const auto& p : pods) {
      const std::string node = p["metadata"]["name"] == "c" ? "n2" : "n1";
      const json f = json::parse(
          extender().filter(json{{"Pod", p}, {"Nodes", nullptr}, {"NodeNames", {node}}}.dump()));
      REQUIRE(f.at("NodeNames") == json::array({node}));
    }
  }
  server::Extender& extender() { return live->extender(); }
  test::FakeApiServer server;
  std::unique_ptr<test::KubeExtender> live;
};

}  // namespace

TEST_CASE("a bind alike waits until the pod before it is allocated on the node", "[pairing]") {
  Rig rig(
      server::PairingOptions{std::chrono::milliseconds(20000), std::chrono::milliseconds(60000)});
  Answer a, b, c;
  rig.extender().bind_async(bind_body("a"), a.sink());
  REQUIRE(a.wait(20s) == std::optional<std::string>(R"({"Error":""})"));
  // b asks 1 GPU on n1 too: it waits (and no thread is blocked: bind_async has returned).
  rig.extender().bind_async(bind_body("b"), b.sink());
  // c asks the same on another node: never held back.
  rig.extender().bind_async(bind_body("c", "n2"), c.sink());
  REQUIRE(c.wait(20s) == std::optional<std::string>(R"({"Error":""})"));
  CHECK_FALSE(b.answered());
  CHECK(rig.server.bindings().size() == 2);

  // The device plugin on n1 served a: it marks the pod, the informer sees it, b goes.
  rig.server.update_pod("ml", "a", [](json& p) {
    p["metadata"]["annotations"]["gapless.io/allocated"] =
        R"({"v":1,"resource":"nvidia.com/gpu","containers":{"c":["n1-GPU-0"]}})";
  });
  REQUIRE(b.wait(20s) == std::optional<std::string>(R"({"Error":""})"));
  CHECK(b.calls() == 1);
  CHECK(rig.server.bindings().size() == 3);
  const std::string metrics = rig.live->metrics().serialize();
  CHECK_THAT(metrics, Catch::Contains("gapless_pairing_waits_total 1"));
  CHECK_THAT(metrics, Catch::Contains("gapless_pairing_wait_seconds_count 1"));
}

TEST_CASE("a bind that waits too long answers the pairing Error", "[pairing]") {
  Rig rig(server::PairingOptions{std::chrono::milliseconds(200), std::chrono::milliseconds(60000)});
  Answer a, b;
  rig.extender().bind_async(bind_body("a"), a.sink());
  REQUIRE(a.wait(20s) == std::optional<std::string>(R"({"Error":""})"));
  rig.extender().bind_async(bind_body("b"), b.sink());
  const auto answer = b.wait(20s);
  REQUIRE(answer);
  CHECK(json::parse(*answer).at("Error") ==
        "pairing: node n1 is admitting pod ml/a with the same device request; retry");
  CHECK(rig.server.bindings().size() == 1);  // b was not bound

  SECTION("and kube-scheduler's retry goes once the pod before it started") {
    rig.server.update_pod("ml", "a", [](json& p) { p["status"]["phase"] = "Running"; });
    // The informer closes a; the retry (same body) then binds at once.
    REQUIRE(rig.live->wait([&] {
      const json again = json::parse(rig.extender().bind(bind_body("b")));
      return again.at("Error") == "";
    }));
    CHECK(rig.server.bindings().size() == 2);
  }
}

TEST_CASE("binds waiting at shutdown are answered", "[pairing]") {
  Rig rig(
      server::PairingOptions{std::chrono::milliseconds(20000), std::chrono::milliseconds(60000)});
  Answer a, b;
  rig.extender().bind_async(bind_body("a"), a.sink());
  REQUIRE(a.wait(20s));
  rig.extender().bind_async(bind_body("b"), b.sink());
  rig.extender().stop_pairing();
  const auto answer = b.wait(20s);
  REQUIRE(answer);
  CHECK_THAT(json::parse(*answer).at("Error").get<std::string>(), Catch::Contains("shutting down"));
}

TEST_CASE("an open pod that never gets allocated expires and lets the next bind go", "[pairing]") {
  Rig rig(server::PairingOptions{std::chrono::milliseconds(20000), std::chrono::milliseconds(300)});
  Answer a, b;
  rig.extender().bind_async(bind_body("a"), a.sink());
  REQUIRE(a.wait(20s));
  rig.extender().bind_async(bind_body("b"), b.sink());
  REQUIRE(b.wait(20s) == std::optional<std::string>(R"({"Error":""})"));
  CHECK_THAT(rig.live->metrics().serialize(), Catch::Contains("gapless_pairing_expired_total 1"));
}

// Binds a and b (alike) to n1 one after the other: both must go at once, and the bound pods
// must not be kept open (nothing would mark them allocated: they would expire with an error
// after --pairing-timeout, 300 ms in these rigs).
void check_binds_never_held(Rig& rig) {
  Answer a, b;
  rig.extender().bind_async(bind_body("a"), a.sink());
  REQUIRE(a.wait(20s) == std::optional<std::string>(R"({"Error":""})"));
  rig.extender().bind_async(bind_body("b"), b.sink());
  REQUIRE(b.wait(20s) == std::optional<std::string>(R"({"Error":""})"));
  CHECK(rig.server.bindings().size() == 2);
  // The informer sees both bound and Pending: still nothing opens, nothing expires.
  std::this_thread::sleep_for(600ms);
  const std::string metrics = rig.live->metrics().serialize();
  CHECK_THAT(metrics, Catch::Contains("gapless_pairing_waits_total 0"));
  CHECK_THAT(metrics, Catch::Contains("gapless_pairing_expired_total 0"));
}

TEST_CASE("binds to a node without gapless-agent (GFD labels) are never held", "[pairing]") {
  Rig rig(server::PairingOptions{std::chrono::milliseconds(20000), std::chrono::milliseconds(300)},
          gfd_node);
  check_binds_never_held(rig);
}

TEST_CASE("binds to a node where Gapless's device plugin does not allocate are never held",
          "[pairing]") {
  // Each node carries the agent's topology annotation (which used to decide): what matters is
  // whether the node shows Gapless's plugin registered with its kubelet.
  const auto [what, node_of] = GENERATE(table<std::string, NodeMaker>({
      {"NVIDIA's device plugin allocates (the kubelet offers nvidia.com/gpu)",
       [](const std::string& name) {
         json n = k8s::testing::topology_node(name, 8);
         n["status"]["allocatable"]["nvidia.com/gpu"] = "8";
         return n;
       }},
      {"the agent runs without its device plugin (no allocatable GPU resource)",
       [](const std::string& name) { return k8s::testing::topology_node(name, 8); }},
      {"the agent's plugin died without removing its annotation (the kubelet offers 0)",
       [](const std::string& name) {
         json n = gapless_plugin_node(name);
         n["status"]["allocatable"] = {{"nvidia.com/gpu", "0"},
                                       {"gapless.io/gpu-shared-count", "0"}};
         return n;
       }},
      {"the annotation names resources the kubelet does not offer",
       [](const std::string& name) {
         json n = gapless_plugin_node(name);
         n["metadata"]["annotations"]["gapless.io/device-plugin"] = "example.com/other";
         return n;
       }},
  }));
  INFO(what);
  Rig rig(server::PairingOptions{std::chrono::milliseconds(20000), std::chrono::milliseconds(300)},
          node_of);
  check_binds_never_held(rig);
}

TEST_CASE("a node whose device plugin stops no longer holds binds", "[pairing]") {
  Rig rig(
      server::PairingOptions{std::chrono::milliseconds(20000), std::chrono::milliseconds(60000)});
  Answer a, b;
  rig.extender().bind_async(bind_body("a"), a.sink());
  REQUIRE(a.wait(20s) == std::optional<std::string>(R"({"Error":""})"));
  // a is open on n1 and never gets marked: the plugin stopped. How the node shows it:
  SECTION("the agent removed its annotation") {
    rig.server.update_node(
        "n1", [](json& n) { n["metadata"]["annotations"].erase("gapless.io/device-plugin"); });
  }
  SECTION("the kubelet marked the plugin's devices unhealthy") {
    rig.server.update_node("n1",
                           [](json& n) { n["status"]["allocatable"]["nvidia.com/gpu"] = "0"; });
  }
  auto gated = [&] {
    bool on = true;
    rig.extender().mutate(
        [&](model::Cluster& c) { on = c.find_node("n1")->gapless_device_plugin; });
    return on;
  };
  REQUIRE(rig.live->wait([&] { return !gated(); }));
  // b asks what a asks, on a's node, while a is still open: it goes at once all the same.
  rig.extender().bind_async(bind_body("b"), b.sink());
  REQUIRE(b.wait(20s) == std::optional<std::string>(R"({"Error":""})"));
  CHECK(rig.server.bindings().size() == 2);
  CHECK_THAT(rig.live->metrics().serialize(), Catch::Contains("gapless_pairing_waits_total 0"));
}
#endif
