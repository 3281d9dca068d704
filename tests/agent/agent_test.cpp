// The agent's loop on the fake NVML and the fake API server: publishing, XID health, lost GPUs,
// links going down, a node without NVML, and the gapless-agent binary's --once --print.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <sys/wait.h>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <thread>
#include <vector>

#include "eventually.h"
#include "fake_api_server.h"
#include "fake_nvml.h"
#include "gapless/agent/agent.h"
#include "gapless/agent/topology_annotation.h"
#include "gapless/k8s/json_fields.h"
#include "kubeconfig.h"
#include "run_command.h"
#include "temp_dir.h"
#include "test_paths.h"

namespace {

using namespace gapless;
using gapless::test::eventually;
using nlohmann::json;
using namespace std::chrono_literals;

// An agent on fake NVML machine `fixture` publishing to a fake API server's node "gpu-1";
// `events` is the script file tests append to.
struct Rig {
  explicit Rig(const std::string& fixture, std::chrono::milliseconds poll = 30s,
               std::string library = GAPLESS_FAKE_NVML)
      : events(dir.write("events", "")), client(api.client_config()), publisher(client, "gpu-1") {
    api.add_node({{"metadata", {{"name", "gpu-1"}}}});
    test::configure_fake_nvml(test::nvml_fixture(fixture), events);
    agent::AgentOptions o;
    o.nvml_library = std::move(library);
    o.poll_interval = poll;
    a = std::make_unique<agent::Agent>(o, &publisher, metrics, [this](const std::string& l) {
      std::lock_guard lock(mu);
      log.push_back(l);
    });
  }

  void script(const std::string& line) { std::ofstream(events, std::ios::app) << line << "\n"; }

  json published() const {
    auto n = api.node("gpu-1");
    REQUIRE(n);
    const json* a = k8s::field_path(*n, {"metadata", "annotations", agent::kTopologyAnnotation});
    return a == nullptr ? json() : json::parse(a->get<std::string>());
  }

  std::size_t patches() const { return api.count_requests("PATCH", "/api/v1/nodes/gpu-1"); }

  std::vector<std::string> lines() {
    std::lock_guard lock(mu);
    return log;
  }

  test::TempDir dir;
  std::string events;
  test::FakeApiServer api;
  k8s::ApiClient client;
  agent::NodePublisher publisher;
  agent::AgentMetrics metrics;
  std::mutex mu;
  std::vector<std::string> log;
  std::unique_ptr<agent::Agent> a;
};

// Runs the agent's loop on a thread for the scope.
struct Running {
  explicit Running(agent::Agent& a) : thread([&a, this] { a.run(stop); }) {}
  ~Running() {
    stop = true;
    thread.join();
  }
  std::atomic<bool> stop{false};
  std::thread thread;
};

}  // namespace

TEST_CASE("the agent publishes once and again only when the machine changes") {
  Rig rig("t4-4");
  REQUIRE(rig.a->tick().ok());
  CHECK(rig.patches() == 1);
  CHECK(rig.published()["gpus"].size() == 4);
  REQUIRE(rig.a->tick().ok());
  REQUIRE(rig.a->tick().ok());
  CHECK(rig.patches() == 1);  // unchanged scans write nothing
  rig.script("lost 2");
  REQUIRE(rig.a->tick().ok());
  CHECK(rig.patches() == 2);
  CHECK_THAT(rig.metrics.serialize(), Catch::Contains("gapless_agent_annotation_patches_total 2"));
}

TEST_CASE("a critical XID flips the GPU unhealthy within the poll interval") {
  // The agent waits on XID events between polls and publishes a critical one at once, so even
  // with a long poll interval the flip arrives in well under a second.
  const auto poll = 30s;
  Rig rig("dgx1-v100", poll);
  Running running(*rig.a);
  // Wait on the annotation itself: the fake API server counts a PATCH before it applies it.
  REQUIRE(eventually([&] { return rig.published()["gpus"].size() == 8; }, 5s));
  CHECK(rig.patches() == 1);
  CHECK(rig.published()["gpus"][3]["healthy"] == true);

  rig.script("xid 5 13");  // an application's fault: counted, GPU stays healthy
  rig.script("xid 3 79");  // fallen off the bus
  REQUIRE(eventually([&] { return rig.published()["gpus"][3]["healthy"] == false; }, 3s));
  CHECK(rig.patches() == 2);
  const json doc = rig.published();
  CHECK(doc["gpus"][5]["healthy"] == true);
  CHECK(doc["gpus"][0]["healthy"] == true);
  const std::string metrics = rig.metrics.serialize();
  CHECK_THAT(metrics, Catch::Contains("gapless_agent_xid_errors_total{xid=\"79\"} 1"));
  CHECK_THAT(metrics, Catch::Contains("gapless_agent_xid_errors_total{xid=\"13\"} 1"));
  CHECK_THAT(metrics, Catch::Contains("gapless_agent_gpus_unhealthy 1"));
  CHECK_THAT(metrics, Catch::Contains("gapless_agent_gpus 8"));
}

TEST_CASE("critical and harmless XIDs") {
  for (unsigned long long xid : {48, 63, 64, 74, 79, 92, 94, 95})
    CHECK(agent::is_critical_xid(xid));
  for (unsigned long long xid : {13, 31, 43, 45, 68, 109}) CHECK_FALSE(agent::is_critical_xid(xid));
}

TEST_CASE("a GPU that stops answering is published unhealthy with what was known of it") {
  Rig rig("dgx1-v100");
  REQUIRE(rig.a->tick().ok());
  const json before = rig.published();
  rig.script("lost 1");
  REQUIRE(rig.a->tick().ok());
  const json after = rig.published();
  CHECK(after["gpus"][1]["healthy"] == false);
  CHECK(after["gpus"][1]["uuid"] == before["gpus"][1]["uuid"]);
  CHECK(after["gpus"][1]["model"] == "Tesla-V100-SXM2-32GB");
  CHECK(after["gpus"][0]["healthy"] == true);
  const model::Node node = test::parse_annotation("gpu-1", after.dump());
  CHECK_FALSE(node.gpus[1].healthy);
  CHECK_FALSE(node.links.get(1, 2).is_nvlink());  // its lanes are gone with it
  CHECK(node.links.get(0, 3).is_nvlink());
  CHECK_THAT(rig.metrics.serialize(), !Catch::Contains("gapless_agent_nvml_errors_total 0"));
}

TEST_CASE("an NVLink going down marks its pair degraded") {
  Rig rig("dgx1-v100");
  REQUIRE(rig.a->tick().ok());
  // GPU 0's lanes: 1, 2, 3, 3, 4, 4 (tests/fixtures/nvml/dgx1-v100.json); link 2 goes to GPU 3.
  rig.script("linkdown 0 2");
  REQUIRE(rig.a->tick().ok());
  const json doc = rig.published();
  json link;
  for (const json& l : doc["links"]) {
    if (l["a"] == 0 && l["b"] == 3) link = l;
  }
  CHECK(link == json{{"a", 0}, {"b", 3}, {"type", "NVLink"}, {"count", 1}, {"degraded", true}});
  const model::Node node = test::parse_annotation("gpu-1", rig.published().dump());
  CHECK(node.links.get(0, 3).degraded);
  CHECK_FALSE(node.links.get(0, 3).is_nvlink());
  CHECK(node.links.get(0, 4).is_nvlink());
}

TEST_CASE("lanes into an NVSwitch going down degrade every pair of that GPU") {
  Rig rig("hgx-h100");
  REQUIRE(rig.a->tick().ok());
  rig.script("linkdown 0 0");
  REQUIRE(rig.a->tick().ok());
  const model::Node node = test::parse_annotation("gpu-1", rig.published().dump());
  for (int peer = 1; peer < 8; ++peer) {
    INFO("pair 0-" << peer);
    CHECK(node.links.get(0, peer).nvlink_count == 17);
    CHECK(node.links.get(0, peer).degraded);
  }
  CHECK(node.links.get(1, 2).nvlink_count == 18);
  CHECK_FALSE(node.links.get(1, 2).degraded);
}

TEST_CASE("an annotation the scheduler would reject is never published") {
  Rig rig("t4-4");
  // Two 3g.40gb instances both at slice 0: a driver never reports this, the parser rejects it.
  const json instance = {{"profileId", 2}, {"start", 0}, {"size", 4}};
  const json machine = {{"gpus",
                         {{{"name", "NVIDIA A100-SXM4-80GB"},
                           {"uuid", "GPU-a"},
                           {"memoryMiB", 81920},
                           {"busId", "0:10:00.0"},
                           {"mig", {{"mode", 1}, {"instances", {instance, instance}}}}}}}};
  test::configure_fake_nvml(rig.dir.write("machine.json", machine.dump()), rig.events);
  auto t = rig.a->tick();  // NVML is loaded here, from the machine above
  REQUIRE_FALSE(t.ok());
  CHECK_THAT(t.error(), Catch::Contains("would reject"));
  CHECK_THAT(t.error(), Catch::Contains("overlaps"));
  CHECK(rig.api.requests().empty());
}

TEST_CASE("without NVML the agent says so once and publishes nothing") {
  Rig rig("t4-4", 50ms, "/nonexistent/libnvidia-ml.so.1");
  {
    Running running(*rig.a);
    std::this_thread::sleep_for(400ms);
  }
  CHECK(rig.api.requests().empty());
  const auto lines = rig.lines();
  REQUIRE(lines.size() == 1);
  CHECK_THAT(lines[0], Catch::Contains("NVML not available"));
  CHECK_THAT(lines[0], Catch::Contains("/nonexistent/libnvidia-ml.so.1"));
  CHECK_FALSE(rig.a->tick().ok());
}

namespace {

using test::Exit;
using test::run_command;

}  // namespace

TEST_CASE("gapless-agent --once --print prints the annotation, or explains why not") {
  test::TempDir dir;
  const std::string err = dir.file("stderr");
  SECTION("with NVML") {
    const Exit e = run_command("GAPLESS_FAKE_NVML_CONFIG=" + test::nvml_fixture("hgx-h100") +
                               " " GAPLESS_AGENT_BINARY " --once --print --nvml-library " +
                               GAPLESS_FAKE_NVML " 2>" + err);
    CHECK(e.status == 0);
    const model::Node node = test::parse_annotation("n", e.out);
    REQUIRE(node.gpus.size() == 8);
    CHECK(node.gpus[0].model == "NVIDIA-H100-80GB-HBM3");
    CHECK(node.links.get(2, 7).nvlink_count == 18);
  }
  SECTION("without NVML") {
    const Exit e = run_command(GAPLESS_AGENT_BINARY " --once --print --nvml-library " +
                               dir.file("libnvidia-ml.so.1") + " 2>" + err);
    CHECK(e.status == 0);
    CHECK(e.out.empty());
    CHECK_THAT(test::read_text(err), Catch::Contains("NVML not available"));
  }
}

TEST_CASE("gapless-agent --once publishes through a kubeconfig, and a second run writes nothing") {
  test::TempDir dir;
  test::FakeApiServer api("secret-token");
  api.add_node({{"metadata", {{"name", "gpu-7"}}}});
  const std::string kubeconfig = test::write_token_kubeconfig(dir, api.url(), "secret-token");
  const std::string command =
      "NODE_NAME=gpu-7 GAPLESS_FAKE_NVML_CONFIG=" + test::nvml_fixture("l4-8") +
      " " GAPLESS_AGENT_BINARY " --once --kubeconfig " + kubeconfig + " --nvml-library " +
      GAPLESS_FAKE_NVML " 2>" + dir.file("stderr");
  CHECK(run_command(command).status == 0);
  CHECK(api.count_requests("PATCH", "/api/v1/nodes/gpu-7") == 1);
  const json stored = api.node("gpu-7").value();
  const json* text =
      k8s::field_path(stored, {"metadata", "annotations", agent::kTopologyAnnotation});
  REQUIRE(text != nullptr);
  const model::Node node = test::parse_annotation("gpu-7", text->get<std::string>());
  CHECK(node.gpus.size() == 8);
  CHECK(node.links.get(0, 1).path == model::PciePath::kPIX);

  CHECK(run_command(command).status == 0);  // a restart on the same machine
  CHECK(api.count_requests("PATCH", "/api/v1/nodes/gpu-7") == 1);
  CHECK(api.count_requests("GET", "/api/v1/nodes/gpu-7") == 2);
}
