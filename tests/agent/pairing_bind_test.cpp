// The bind gate in the extender (docs/node-pairing.md), wired to the fake API server as
// gapless-extender runs it: a bind alike to a pod on its node that is not allocated yet waits,
// goes when the device plugin's gapless.io/allocated reaches the pod informer, and gives up
// with the pairing Error after --pairing-wait.
#if __has_include("fake_api_server.h")
#include <catch2/catch.hpp>

#include <condition_variable>
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

struct Rig {
  explicit Rig(server::PairingOptions o, bool gfd = false) {
    std::vector<json> pods;
    for (const char* name : {"a", "b", "c"}) {
      pods.push_back(k8s::testing::pod_object(name, std::string("uid-") + name, ""));
    }
    if (gfd) {
      server.load({gfd_node("n1"), gfd_node("n2")}, pods);
    } else {
      server.load({k8s::testing::topology_node("n1", 8), k8s::testing::topology_node("n2", 8)},
                  pods);
    }
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

TEST_CASE("binds to a node without gapless-agent (GFD labels) are never held", "[pairing]") {
  // Nothing there would mark a pod allocated: a bind alike goes at once, and the bound pod is
  // not kept open (it would expire with an error after --pairing-timeout).
  Rig rig(server::PairingOptions{std::chrono::milliseconds(20000), std::chrono::milliseconds(300)},
          true);
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
#endif
