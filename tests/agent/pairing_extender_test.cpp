// The whole pairing loop (docs/node-pairing.md): the extender's bind gate holds a bind alike to
// a pod its node has not allocated yet; the device plugin serves that pod, marks it
// gapless.io/allocated through the API server; the extender's pod informer sees the mark and
// lets the held bind go; the plugin then serves the second pod with its own record's GPU.
#include <catch2/catch.hpp>

#include <condition_variable>
#include <mutex>
#include <optional>

#include "../k8s/k8s_objects.h"
#include "kube_extender.h"
#include "plugin_rig.h"

using namespace gapless;
using namespace std::chrono_literals;
using nlohmann::json;

namespace {

struct Answer {
  std::mutex mu;
  std::condition_variable cv;
  std::optional<std::string> text;
  std::function<void(std::string)> sink() {
    return [this](std::string a) {
      std::lock_guard lock(mu);
      text = std::move(a);
      cv.notify_all();
    };
  }
  std::optional<std::string> wait(std::chrono::milliseconds limit) {
    std::unique_lock lock(mu);
    cv.wait_for(lock, limit, [&] { return text.has_value(); });
    return text;
  }
};

std::string bind_body(const std::string& name) {
  return json{
      {"PodName", name}, {"PodNamespace", "ml"}, {"PodUID", "uid-" + name}, {"Node", "gpu-1"}}
      .dump();
}

// The GPU UUID of the record the extender posted for `name`.
std::string recorded_gpu(const test::FakeApiServer& api, const std::string& name) {
  for (const json& b : api.bindings()) {
    if (b["metadata"]["name"] != name) continue;
    const json record =
        json::parse(b["metadata"]["annotations"]["gapless.io/allocation"].get<std::string>());
    return record["gpus"][0]["uuid"];
  }
  return "";
}

}  // namespace

TEST_CASE("the plugin's allocated mark lets the extender's held bind go", "[pairing]") {
  test::PluginFakes f;
  f.api.load(
      {k8s::testing::with_gapless_plugin(k8s::testing::topology_node("gpu-1", 4), 4)},
      {k8s::testing::pod_object("a", "uid-a", ""), k8s::testing::pod_object("b", "uid-b", "")});
  test::KubeExtender live(f.api, "", server::PairingOptions{20000ms, 60000ms});
  REQUIRE(live.wait([&] { return live.extender().ready(); }));

  std::vector<agent::GpuState> gpus;
  for (int i = 0; i < 4; ++i) {
    agent::GpuState g;
    g.index = i;
    g.uuid = "gpu-1-GPU-" + std::to_string(i);
    gpus.push_back(g);
  }
  agent::DevicePlugin plugin(f.options(agent::kWholeGpuResource), f.client, nullptr);
  plugin.set_gpus(gpus);
  f.start(plugin, agent::kWholeGpuResource, 4);

  for (const char* name : {"a", "b"}) {
    const json pod = *f.api.pod("ml", name);
    const json answer = json::parse(live.extender().filter(
        json{{"Pod", pod}, {"Nodes", nullptr}, {"NodeNames", {"gpu-1"}}}.dump()));
    REQUIRE(answer.at("Error") == "");
  }
  Answer a, b;
  live.extender().bind_async(bind_body("a"), a.sink());
  REQUIRE(a.wait(20s) == std::optional<std::string>(R"({"Error":""})"));
  live.extender().bind_async(bind_body("b"), b.sink());
  CHECK(f.api.bindings().size() == 1);  // b is held: the node has not allocated a yet

  // The kubelet admits a: the plugin serves it and marks it; b's bind goes.
  const auto first = f.kubelet.admit_batch(
      {{"uid-a", "a", "2026-11-23T10:00:00Z", {{"c", agent::kWholeGpuResource, 1, false}}}},
      test::FakeKubelet::Ties::kAsGiven);
  REQUIRE(first.at(0).admitted);
  CHECK(test::visible(first[0].containers.at("c")) == recorded_gpu(f.api, "a"));
  REQUIRE(b.wait(20s) == std::optional<std::string>(R"({"Error":""})"));

  const auto second = f.kubelet.admit_batch(
      {{"uid-b", "b", "2026-11-23T10:00:00Z", {{"c", agent::kWholeGpuResource, 1, false}}}},
      test::FakeKubelet::Ties::kAsGiven);
  REQUIRE(second.at(0).admitted);
  CHECK(test::visible(second[0].containers.at("c")) == recorded_gpu(f.api, "b"));
  CHECK(recorded_gpu(f.api, "a") != recorded_gpu(f.api, "b"));
}
