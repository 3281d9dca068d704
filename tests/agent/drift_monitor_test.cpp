// The drift check end to end on fakes (drift_rig.h): a fake kubelet PodResources server, the
// fake API server and the fake NVML. What a user sees when the kubelet assigned other devices
// than the records say (a swap between two pods) or a pod without a record holds a GPU: the
// GaplessDrift Event, the metrics and the "inUseBy" fence in the topology annotation; how the
// fence lifts, survives a kubelet restart and a failed read. The extender's side is in
// drift_extender_test.cpp.
#include <atomic>
#include <thread>

#include "drift_rig.h"
#include "eventually.h"

namespace {

using namespace gapless;
using namespace gapless::test::drift;
using nlohmann::json;

TEST_CASE("drift: two pods whose GPUs the kubelet swapped are reported and fenced",
          "[drift][agent]") {
  const auto uuids = fixture_uuids();
  DriftRig rig;
  FakePodResources kubelet(rig.socket);
  rig.api.add_pod(running_pod("a", 0, uuids[0]));
  rig.api.add_pod(running_pod("b", 1, uuids[1]));
  kubelet.set({holding("a", uuids[1]), holding("b", uuids[0])});

  REQUIRE(rig.a->tick().ok());

  // One Warning Event per pod, saying what the kubelet assigned and what the record says.
  auto events = rig.drift_events();
  REQUIRE(events.size() == 2);
  for (const json& e : events) {
    CHECK(e.value("type", "") == "Warning");
    const std::string pod = e.at("involvedObject").value("name", "");
    const std::string msg = e.value("message", "");
    const std::string got = pod == "a" ? uuids[1] : uuids[0];
    const std::string want = pod == "a" ? uuids[0] : uuids[1];
    CHECK(msg.find("container main holds nvidia.com/gpu devices " + got) != std::string::npos);
    CHECK(msg.find("record names " + want) != std::string::npos);
  }
  CHECK(rig.metric_has("gapless_agent_drift_containers{kind=\"mismatch\"} 2"));
  CHECK(rig.metric_has("gapless_agent_drift_events_total 2"));
  CHECK(rig.metric_has("gapless_agent_drift_fenced_gpus 2"));
  // The annotation names who really uses GPUs 0 and 1.
  const json gpus = rig.published_gpus();
  CHECK(gpus[0].at("inUseBy") == json::array({"ml/b/main"}));
  CHECK(gpus[1].at("inUseBy") == json::array({"ml/a/main"}));
  CHECK_FALSE(gpus[2].contains("inUseBy"));

  // A second check finds the same drift: no new Event.
  REQUIRE(rig.a->tick().ok());
  CHECK(rig.drift_events().size() == 2);

  // Pod a ends (its container too): GPU 1 is no longer used by anyone, the fence on it
  // lifts; GPU 0 stays fenced while b's container runs there.
  rig.api.delete_pod("ml", "a");
  kubelet.set({holding("b", uuids[0])});
  REQUIRE(rig.a->tick().ok());
  const json after = rig.published_gpus();
  CHECK(after[0].at("inUseBy") == json::array({"ml/b/main"}));
  CHECK_FALSE(after[1].contains("inUseBy"));
  CHECK(rig.metric_has("gapless_agent_drift_containers{kind=\"mismatch\"} 1"));

  // b ends too: nothing is fenced any more.
  rig.api.delete_pod("ml", "b");
  kubelet.set({});
  REQUIRE(rig.a->tick().ok());
  for (const json& g : rig.published_gpus()) CHECK_FALSE(g.contains("inUseBy"));
  CHECK(rig.metric_has("gapless_agent_drift_fenced_gpus 0"));
  CHECK(rig.extender_node().gpus[0].usable());
}

TEST_CASE("drift: a pod without a record holding a GPU fences that GPU", "[drift][agent]") {
  const auto uuids = fixture_uuids();
  DriftRig rig;
  FakePodResources kubelet(rig.socket);
  rig.api.add_pod(running_pod("other", std::nullopt, ""));
  kubelet.set({holding("other", uuids[0])});

  REQUIRE(rig.a->tick().ok());
  auto events = rig.drift_events();
  REQUIRE(events.size() == 1);
  CHECK(events[0].at("involvedObject").value("name", "") == "other");
  CHECK(events[0].value("message", "").find("without a gapless.io/allocation record") !=
        std::string::npos);
  CHECK(rig.metric_has("gapless_agent_drift_containers{kind=\"no-record\"} 1"));
  CHECK(rig.published_gpus()[0].at("inUseBy") == json::array({"ml/other/main"}));
}

TEST_CASE("drift: without the PodResources socket the check is skipped", "[drift][agent]") {
  DriftRig rig;  // no fake kubelet: the socket does not exist
  rig.api.add_pod(running_pod("other", std::nullopt, ""));
  REQUIRE(rig.a->tick().ok());
  CHECK(rig.drift_events().empty());
  for (const json& g : rig.published_gpus()) CHECK_FALSE(g.contains("inUseBy"));
}

TEST_CASE("drift: a failed read keeps the fences (no lift without a check that saw it end)",
          "[drift][agent]") {
  const auto uuids = fixture_uuids();
  DriftRig rig;
  FakePodResources kubelet(rig.socket);
  rig.api.add_pod(running_pod("other", std::nullopt, ""));
  kubelet.set({holding("other", uuids[3])});
  REQUIRE(rig.a->tick().ok());
  REQUIRE(rig.published_gpus()[3].contains("inUseBy"));
  rig.api.fail_next("GET", "/api/v1/pods", 1);
  REQUIRE(rig.a->tick().ok());
  CHECK(rig.published_gpus()[3].at("inUseBy") == json::array({"ml/other/main"}));
  CHECK(rig.metric_has("gapless_agent_drift_check_errors_total 1"));
}

}  // namespace

namespace {

TEST_CASE("drift: inUseBy round-trips through the topology annotation, strictly validated",
          "[drift]") {
  agent::NodeGpus node;
  node.gpus = {{0, "GPU-a", "NVIDIA-H100-80GB-HBM3", 81559, 0, true, false, {}, ""},
               {1, "GPU-b", "NVIDIA-H100-80GB-HBM3", 81559, 0, true, false, {}, ""}};
  const std::string text = agent::topology_annotation(node, {{"GPU-b", {"ml/x/main"}}});
  CHECK(text.find(R"("healthy":true,"inUseBy":["ml/x/main"])") != std::string::npos);
  auto parsed = k8s::node_from_topology_annotation("n", text);
  REQUIRE(parsed.ok());
  CHECK(parsed->gpus[0].usable());
  CHECK(parsed->gpus[1].in_use_by == std::vector<std::string>{"ml/x/main"});
  CHECK_FALSE(parsed->gpus[1].usable());
  CHECK(parsed->gpus[1].healthy);  // its own reason, not a health problem

  for (const char* bad : {R"("inUseBy":"ml/x/main")", R"("inUseBy":[""])", R"("inUseBy":[3])"}) {
    const std::string doc =
        std::string(R"({"version":1,"gpus":[{"index":0,"model":"NVIDIA-H100-80GB-HBM3",)") +
        R"("memoryMiB":81559,)" + bad + "}]}";
    auto r = k8s::node_from_topology_annotation("n", doc);
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.error(), Catch::Contains("gpus[0].inUseBy"));
  }
}

}  // namespace

namespace {

TEST_CASE("drift: wake() checks at once instead of at the next poll", "[drift][agent]") {
  const auto uuids = fixture_uuids();
  DriftRig rig;  // polls every 30 s
  FakePodResources kubelet(rig.socket);
  struct Loop {  // joined however the test ends
    explicit Loop(agent::Agent& a) : thread([&a, this] { a.run(stop); }) {}
    ~Loop() {
      stop = true;
      thread.join();
    }
    std::atomic<bool> stop{false};
    std::thread thread;
  } loop(*rig.a);
  // The first tick's annotation is on the Node: its drift check is done (it runs before the
  // publish). The next poll is 30 s away, longer than eventually() waits.
  REQUIRE(test::eventually([&] {
    auto n = rig.api.node("gpu-1");
    return n && k8s::field_path(*n, {"metadata", "annotations", agent::kTopologyAnnotation});
  }));
  rig.api.add_pod(running_pod("other", std::nullopt, ""));
  kubelet.set({holding("other", uuids[5])});
  rig.a->wake();
  CHECK(test::eventually([&] { return rig.drift_events().size() == 1; }));
  CHECK(test::eventually([&] { return rig.published_gpus()[5].contains("inUseBy"); }));
}

}  // namespace

namespace {

TEST_CASE("drift: across a kubelet restart the fence stays and nothing is reported twice",
          "[drift][agent]") {
  const auto uuids = fixture_uuids();
  DriftRig rig;
  auto kubelet = std::make_unique<FakePodResources>(rig.socket);
  rig.api.add_pod(running_pod("other", std::nullopt, ""));
  kubelet->set({holding("other", uuids[2])});
  REQUIRE(rig.a->tick().ok());
  REQUIRE(rig.drift_events().size() == 1);

  kubelet.reset();  // the kubelet is down: the fence must not lift
  REQUIRE(rig.a->tick().ok());
  CHECK(rig.published_gpus()[2].at("inUseBy") == json::array({"ml/other/main"}));

  // Back, answering from its checkpoint: the same assignment, the same finding (not reported
  // again), and a pod admitted since, which is.
  rig.api.add_pod(running_pod("late", std::nullopt, ""));
  kubelet = std::make_unique<FakePodResources>(rig.socket);
  kubelet->set({holding("other", uuids[2]), holding("late", uuids[4])});
  REQUIRE(rig.a->tick().ok());
  const json gpus = rig.published_gpus();
  CHECK(gpus[2].at("inUseBy") == json::array({"ml/other/main"}));
  CHECK(gpus[4].at("inUseBy") == json::array({"ml/late/main"}));
  const auto events = rig.drift_events();
  REQUIRE(events.size() == 2);
  CHECK(events[1].at("involvedObject").value("name", "") == "late");
  CHECK(rig.metric_has("gapless_agent_drift_containers{kind=\"no-record\"} 2"));
}

}  // namespace

namespace {

// Issue 37: the real kubelet lists each device of a container as its own entry; the check
// compared each entry with the whole record and posted one false Warning per GPU.
TEST_CASE("drift: multi-GPU pods holding their records' GPUs are no drift, in either shape",
          "[drift][agent]") {
  const auto uuids = fixture_uuids();
  using Shape = FakePodResources::Shape;
  const auto shape = GENERATE(Shape::kPerDevice, Shape::kGrouped);
  INFO("shape " << (shape == Shape::kPerDevice ? "per device (the kubelet's)" : "grouped"));
  DriftRig rig;
  FakePodResources kubelet(rig.socket, shape);
  rig.api.add_pod(running_pod("two", std::map<int, std::string>{{0, uuids[0]}, {1, uuids[1]}}));
  rig.api.add_pod(running_pod(
      "four",
      std::map<int, std::string>{{2, uuids[2]}, {3, uuids[3]}, {4, uuids[4]}, {5, uuids[5]}}));
  kubelet.set({holding("two", {uuids[1], uuids[0]}),
               holding("four", {uuids[5], uuids[2], uuids[4], uuids[3]})});

  REQUIRE(rig.a->tick().ok());
  CHECK(rig.drift_events().empty());
  CHECK(rig.metric_has("gapless_agent_drift_containers{kind=\"mismatch\"} 0"));
  CHECK(rig.metric_has("gapless_agent_drift_fenced_gpus 0"));
  for (const json& g : rig.published_gpus()) CHECK_FALSE(g.contains("inUseBy"));

  // One GPU of the four-GPU pod is another: one Warning for the container, naming all four
  // devices it holds, and only that GPU fenced.
  kubelet.set({holding("two", {uuids[1], uuids[0]}),
               holding("four", {uuids[5], uuids[2], uuids[4], uuids[6]})});
  REQUIRE(rig.a->tick().ok());
  const auto events = rig.drift_events();
  REQUIRE(events.size() == 1);
  CHECK(events[0].at("involvedObject").value("name", "") == "four");
  CHECK(rig.metric_has("gapless_agent_drift_containers{kind=\"mismatch\"} 1"));
  const json gpus = rig.published_gpus();
  CHECK(gpus[6].at("inUseBy") == json::array({"ml/four/main"}));
  CHECK_FALSE(gpus[3].contains("inUseBy"));
}

}  // namespace
