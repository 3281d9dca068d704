// The device plugin's MIG path against the fake kubelet, the fake API server and the fake NVML
// on the DGX A100 fixture: GPU 6 has an operator's layout (3g.40gb@0, 2g.20gb@4, 1g.10gb@6),
// GPU 7 is MIG-enabled without instances (reconfigurable).
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <fstream>

#include "agent_process.h"
#include "fake_nvml.h"
#include "gapless/agent/agent.h"
#include "gapless/agent/mig_reaper.h"
#include "kubeconfig.h"
#include "plugin_rig.h"

using namespace gapless;
using gapless::test::eventually;
using gapless::test::visible;
using nlohmann::json;
using namespace std::chrono_literals;

namespace {

const std::string kGpu6 = "GPU-32f95ddc-7b1e-4966-212e-0e67b3eebf01";
const std::string kGpu7 = "GPU-8b04f8e3-e839-b1e2-dd76-348e275fd56e";
const std::string kMig1g = "nvidia.com/mig-1g.10gb";

// A pod bound to "gpu-1" at `bound`, one container asking for `slices.size()` instances of
// `profile`, its record naming (gpu, start) for each unless `record` is false.
json mig_pod(const std::string& name, const std::string& bound,
             const std::vector<std::pair<int, int>>& slices, const std::string& profile = "1g.10gb",
             bool record = true) {
  model::Allocation a = test::record_of(name);
  for (auto [gpu, start] : slices) a.mig.push_back({gpu, profile, start});
  const json limits = {{"nvidia.com/mig-" + profile, std::to_string(slices.size())}};
  json containers = {{{"name", "c0"}, {"resources", {{"limits", limits}}}}};
  return test::bound_pod(name, bound, std::move(containers), record ? &a : nullptr);
}

// The fake's instances on GPU `gpu`: start -> MIG device UUID.
std::map<int, std::string> instances_on(int gpu) {
  std::map<int, std::string> out;
  const json state = test::fake_nvml_mig_state();  // the loop below must not outlive it
  for (const auto& i : state["gpus"][gpu]["instances"]) {
    out[i["start"].get<int>()] = i["computes"].empty() ? "" : i["computes"][0]["uuid"];
  }
  return out;
}

struct MigRig : test::PluginFakes {
  // `devices`: how many the kubelet sees once the plugin is up (8 on the DGX A100).
  explicit MigRig(const std::string& fixture = test::nvml_fixture("dgx-a100"),
                  std::size_t devices = 8)
      : devices(devices) {
    test::configure_fake_nvml(fixture);
    auto lib = agent::NvmlLibrary::open(GAPLESS_FAKE_NVML);
    INFO((lib.ok() ? std::string() : lib.error()));
    REQUIRE(lib.ok());
    nvml = std::move(lib).value();
    start();
  }
  ~MigRig() {
    plugin.reset();
    mig.reset();
  }

  void start() {
    std::filesystem::create_directories(dir.path() / "gapless");
    mig = std::make_unique<agent::MigInstances>(*nvml, dir.file("gapless/mig-instances.json"));
    REQUIRE(mig->supported());
    REQUIRE(mig->load().ok());
    agent::DevicePluginOptions o = options(kMig1g);
    o.mig = mig.get();
    plugin = std::make_unique<agent::DevicePlugin>(o, client, nullptr);
    scan();
    PluginFakes::start(*plugin, kMig1g, devices);
  }
  // What the agent does every poll: scan, hide the instances it made, feed the plugin.
  void scan() {
    agent::GpuScanner scanner(*nvml, nullptr);
    auto node = scanner.scan();
    REQUIRE(node.ok());
    for (auto& g : node->gpus) {
      std::erase_if(g.mig_instances,
                    [&](const model::MigInstance& i) { return mig->created(g.uuid, i.start); });
    }
    plugin->set_gpus(node->gpus);
  }
  test::FakeKubelet::Admitted admit(int count = 1) { return kubelet.admit(kMig1g, count); }

  std::size_t devices;
  std::unique_ptr<agent::NvmlLibrary> nvml;
  std::unique_ptr<agent::MigInstances> mig;
  std::unique_ptr<agent::DevicePlugin> plugin;
};

}  // namespace

TEST_CASE("MIG devices are the placements a record may name", "[deviceplugin][mig]") {
  MigRig rig;
  const auto devices = rig.kubelet.devices(kMig1g);
  // The reconfigurable GPU: every start 1g.10gb allows on an A100-80GB.
  for (int start = 0; start <= 6; ++start) {
    CHECK(devices.count(kGpu7 + "::slice-" + std::to_string(start)) == 1);
  }
  // The operator's layout: its one 1g.10gb instance only.
  CHECK(devices.count(kGpu6 + "::slice-6") == 1);
  CHECK(rig.kubelet.requests().at(0).resource_name() == kMig1g);
}

TEST_CASE("a MIG pod gets its instance created at the recorded start, and its MIG device",
          "[deviceplugin][mig]") {
  MigRig rig;
  rig.api.add_pod(mig_pod("a", "2026-11-23T10:00:01Z", {{7, 3}}));
  auto a = rig.admit();
  REQUIRE(a.ok);
  CHECK(a.ids == std::vector<std::string>{kGpu7 + "::slice-3"});  // steered by the preference
  const auto on7 = instances_on(7);
  REQUIRE(on7.size() == 1);
  REQUIRE(on7.count(3) == 1);
  CHECK(on7.at(3).rfind("MIG-", 0) == 0);
  CHECK(visible(a) == on7.at(3));
  CHECK(rig.mig->created(kGpu7, 3));
  // The next scan hides it: GPU 7 still offers every placement.
  rig.scan();
  CHECK(rig.kubelet.devices(kMig1g).size() == 8);
}

TEST_CASE("two MIG pods bound back to back each get their own instance", "[deviceplugin][mig]") {
  MigRig rig;
  // One after the other: the bind gate never has two alike pending on a node.
  rig.api.add_pod(mig_pod("first", "2026-11-23T10:00:01Z", {{7, 5}}));
  auto first = rig.admit();
  rig.api.add_pod(mig_pod("second", "2026-11-23T10:00:02Z", {{7, 0}}));
  auto second = rig.admit();
  REQUIRE(first.ok);
  REQUIRE(second.ok);
  const auto on7 = instances_on(7);
  REQUIRE(on7.size() == 2);
  CHECK(visible(first) == on7.at(5));
  CHECK(visible(second) == on7.at(0));
  CHECK(visible(first) != visible(second));
}

TEST_CASE("an instance already at the recorded placement is reused", "[deviceplugin][mig]") {
  MigRig rig;
  const std::string operators = instances_on(6).at(6);
  rig.api.add_pod(mig_pod("static", "2026-11-23T10:00:01Z", {{6, 6}}));
  auto a = rig.admit();
  REQUIRE(a.ok);
  CHECK(visible(a) == operators);
  CHECK(test::fake_nvml_mig_state()["created"] == 0);
  CHECK_FALSE(rig.mig->created(kGpu6, 6));  // still the operator's: never destroyed
}

TEST_CASE("an instance in the way is an error that names it", "[deviceplugin][mig]") {
  MigRig rig;
  SECTION("one the operator made") {
    // 1g.10gb at 4 overlaps the operator's 2g.20gb at slices 4-5.
    rig.api.add_pod(mig_pod("clash", "2026-11-23T10:00:01Z", {{6, 4}}));
    auto a = rig.admit();
    CHECK_FALSE(a.ok);
    CHECK_THAT(a.error, Catch::Contains(kGpu6));
    CHECK_THAT(a.error, Catch::Contains("at slices 4-5, not created by Gapless"));
    CHECK(instances_on(6).size() == 3);  // untouched
  }
  SECTION("one a record of a live pod still names") {
    // GPU 7: a 3g.40gb at 4 made for a running pod (through the API as the agent does).
    auto made = rig.mig->ensure({kGpu7, "3g.40gb", 4}, [](const agent::MigSlot&) { return true; });
    REQUIRE(made.ok());
    rig.api.add_pod(mig_pod("big", "2026-11-23T10:00:00Z", {{7, 4}}, "3g.40gb"));
    rig.api.update_pod("ml", "big", [](json& p) { p["status"]["phase"] = "Running"; });
    rig.api.add_pod(mig_pod("small", "2026-11-23T10:00:01Z", {{7, 5}}));
    auto a = rig.admit();
    CHECK_FALSE(a.ok);
    CHECK_THAT(a.error, Catch::Contains("created by Gapless) is still in use"));
    CHECK(instances_on(7).count(4) == 1);
    SECTION("and is replaced once its pod is gone") {
      rig.api.delete_pod("ml", "big");
      auto b = rig.admit();
      REQUIRE(b.ok);
      const auto on7 = instances_on(7);
      CHECK(on7.size() == 1);
      CHECK(visible(b) == on7.at(5));
      CHECK_FALSE(rig.mig->created(kGpu7, 4));
    }
  }
}

TEST_CASE("NVML's refusals reach the kubelet with the reason", "[deviceplugin][mig]") {
  test::TempDir fixture;
  json gpu = {{"name", "NVIDIA A100-SXM4-80GB"},
              {"uuid", kGpu7},
              {"memoryMiB", 81920},
              {"busId", "00000000:07:00.0"},
              {"mig", {{"mode", 1}, {"instances", json::array()}, {"createDenied", true}}}};
  MigRig rig(fixture.write("denied.json", json{{"gpus", {gpu}}}.dump()), 7);
  rig.api.add_pod(mig_pod("a", "2026-11-23T10:00:01Z", {{0, 2}}));
  auto a = rig.admit();
  CHECK_FALSE(a.ok);
  CHECK_THAT(a.error, Catch::Contains("creating 1g.10gb at slice 2"));
  CHECK_THAT(a.error, Catch::Contains("Insufficient Permissions"));
  CHECK_THAT(a.error, Catch::Contains("privileged"));
  CHECK_FALSE(rig.mig->created(kGpu7, 2));
}

TEST_CASE("the fake NVML refuses overlapping placements", "[mig]") {
  auto nvml = test::open_fake_nvml("dgx-a100");
  const agent::NvmlFunctions& f = nvml->fn();
  nvmlDevice_t dev = nullptr;
  REQUIRE(f.handle_by_index(6, &dev) == NVML_SUCCESS);
  nvmlGpuInstancePlacement_t at4{4, 1};
  nvmlGpuInstance_t gi = nullptr;
  CHECK(f.create_gi(dev, NVML_GPU_INSTANCE_PROFILE_1_SLICE, &at4, &gi) ==
        NVML_ERROR_INSUFFICIENT_RESOURCES);
  nvmlGpuInstancePlacement_t at7{7, 1};
  CHECK(f.create_gi(dev, NVML_GPU_INSTANCE_PROFILE_1_SLICE, &at7, &gi) == NVML_SUCCESS);
}

TEST_CASE("the reaper destroys only unused instances the agent created, after the grace period",
          "[deviceplugin][mig]") {
  MigRig rig;
  rig.api.add_pod(mig_pod("done", "2026-11-23T10:00:01Z", {{7, 3}}));
  const auto done = rig.admit();
  REQUIRE(done.ok);
  rig.api.add_pod(mig_pod("busy", "2026-11-23T10:00:02Z", {{7, 0}}));
  REQUIRE(rig.admit().ok);
  rig.api.update_pod("ml", "done", [](json& p) { p["status"]["phase"] = "Succeeded"; });
  rig.kubelet.release(kMig1g, done.ids);  // the kubelet frees a finished pod's devices
  rig.api.update_pod("ml", "busy", [](json& p) { p["status"]["phase"] = "Running"; });
  agent::MigReaper reaper(*rig.mig, rig.client, "gpu-1", 60s, nullptr);
  const auto t0 = agent::MigReaper::Clock::now();
  REQUIRE(reaper.sweep(t0).ok());
  auto early = reaper.sweep(t0 + 59s);
  REQUIRE(early.ok());
  CHECK(early->empty());
  CHECK(instances_on(7).size() == 2);

  SECTION("after the grace period the unused one goes, the others stay") {
    auto late = reaper.sweep(t0 + 60s);
    REQUIRE(late.ok());
    CHECK(*late == std::vector<agent::MigSlot>{{kGpu7, "1g.10gb", 3}});
    CHECK(instances_on(7).count(3) == 0);
    CHECK(instances_on(7).count(0) == 1);  // its pod runs
    CHECK(instances_on(6).size() == 3);    // the operator's
    CHECK_FALSE(rig.mig->created(kGpu7, 3));
  }
  SECTION("a pod that names it again within the period keeps it") {
    rig.api.add_pod(mig_pod("again", "2026-11-23T10:00:03Z", {{7, 3}}));
    const std::string before = instances_on(7).at(3);
    auto a = rig.admit();
    REQUIRE(a.ok);
    CHECK(visible(a) == before);  // reused, not made anew
    auto late = reaper.sweep(t0 + 120s);
    REQUIRE(late.ok());
    CHECK(late->empty());
  }
  SECTION("without the pod list nothing is destroyed") {
    rig.api.fail_next("GET", "/api/v1/pods", 1, 503, "apiserver down");
    auto late = reaper.sweep(t0 + 600s);
    CHECK_FALSE(late.ok());
    CHECK(instances_on(7).size() == 2);
  }
}

TEST_CASE("an instance handed out after the reaper's pod list is not destroyed by it", "[mig]") {
  MigRig rig;
  const agent::MigSlot slot{kGpu7, "1g.10gb", 2};
  auto any = [](const agent::MigSlot&) { return true; };
  REQUIRE(rig.mig->ensure(slot, any).ok());
  const auto listed_at = rig.mig->generation();  // the reaper lists the pods here ...
  REQUIRE(rig.mig->ensure(slot, any).ok());      // ... and a new pod is given the instance
  const Status s = rig.mig->destroy(slot, listed_at);
  CHECK_FALSE(s.ok());
  CHECK_THAT(s.error(), Catch::Contains("handed to a container meanwhile"));
  CHECK(instances_on(7).count(2) == 1);
  CHECK(rig.mig->destroy(slot, rig.mig->generation()).ok());
  CHECK(instances_on(7).count(2) == 0);
}

TEST_CASE("a restarted plugin keeps its MIG allocations and its instances", "[deviceplugin][mig]") {
  MigRig rig;
  rig.api.add_pod(mig_pod("a", "2026-11-23T10:00:01Z", {{7, 1}}));
  const auto a = rig.admit();
  REQUIRE(a.ok);
  rig.plugin.reset();
  rig.start();  // a new MigInstances, read from its file
  CHECK(rig.mig->created(kGpu7, 1));
  rig.api.add_pod(mig_pod("b", "2026-11-23T10:00:02Z", {{7, 2}}));
  const auto b = rig.admit();
  REQUIRE(b.ok);  // b's record, not "a" again: the checkpoint knows "a" was served
  CHECK(visible(b) == instances_on(7).at(2));
  CHECK(visible(b) != visible(a));
}

TEST_CASE("the agent hides the instances it made, so the GPU stays reconfigurable", "[mig]") {
  MigRig rig;
  rig.api.add_pod(mig_pod("a", "2026-11-23T10:00:01Z", {{7, 3}}));
  REQUIRE(rig.admit().ok);
  agent::AgentOptions o;
  o.nvml_library = GAPLESS_FAKE_NVML;
  agent::AgentMetrics metrics;
  agent::Agent agent(o, nullptr, metrics, nullptr);
  agent.hide_mig_instances([&](const agent::GpuState& g, const model::MigInstance& i) {
    return rig.mig->created(g.uuid, i.start);
  });
  auto text = agent.tick();
  REQUIRE(text.ok());
  const json doc = json::parse(*text);
  CHECK(doc["gpus"][7]["mig"]["instances"].empty());
  CHECK(doc["gpus"][6]["mig"]["instances"].size() == 3);
}

namespace {

// The agent's file of the instances it created: "GPU@start" each.
std::set<std::string> created_file(const test::TempDir& dir) {
  std::ifstream in(dir.file("gapless/mig-instances.json"));
  const json doc = json::parse(in, nullptr, false);
  std::set<std::string> out;
  if (!doc.is_object() || !doc.contains("instances")) return out;
  for (const auto& i : doc["instances"]) {
    out.insert(i["gpu"].get<std::string>() + "@" + std::to_string(i["start"].get<int>()));
  }
  return out;
}

}  // namespace

TEST_CASE("gapless-agent --device-plugin serves MIG profiles, creates and reaps instances",
          "[deviceplugin][mig]") {
  test::TempDir dir;
  test::FakeApiServer api;
  api.add_node({{"metadata", {{"name", "gpu-1"}}}});
  test::FakeKubelet kubelet(dir.path().string());
  const pid_t pid = test::spawn_agent(
      {"--device-plugin", "--device-plugin-dir", dir.path().string(), "--kubeconfig",
       test::write_token_kubeconfig(dir, api.url(), "t"), "--nvml-library", GAPLESS_FAKE_NVML,
       "--listen", "127.0.0.1:0", "--node-name", "gpu-1", "--mig-grace-period", "0"},
      test::nvml_fixture("dgx-a100"), dir.file("stderr"));
  REQUIRE(pid >= 0);
  // 1g.10gb: 7 placements on GPU 7, the operator's one on GPU 6; 3g.40gb: 2 and 1.
  const bool up = eventually(
      [&] {
        return kubelet.devices(kMig1g).size() == 8 &&
               kubelet.devices("nvidia.com/mig-3g.40gb").size() == 3 &&
               kubelet.devices("nvidia.com/gpu").size() == 6;
      },
      10s);
  test::FakeKubelet::Admitted admitted;
  bool made = false, reaped = false;
  if (up) {
    api.add_pod(mig_pod("p", "2026-11-23T10:00:01Z", {{7, 3}}));
    admitted = kubelet.admit(kMig1g, 1);
    made = created_file(dir) == std::set<std::string>{kGpu7 + "@3"};
    api.update_pod("ml", "p", [](json& p) { p["status"]["phase"] = "Succeeded"; });
    reaped = eventually([&] { return created_file(dir).empty(); }, 10s);
  }
  const int status = test::stop_agent(pid);
  INFO(std::ifstream(dir.file("stderr")).rdbuf());
  REQUIRE(up);
  REQUIRE(admitted.ok);
  CHECK(visible(admitted).rfind("MIG-", 0) == 0);
  CHECK(made);
  CHECK(reaped);  // grace period 0: gone at the first sweep after the pod finished
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}
