// The device plugin against a fake kubelet (tests/agent/fake_kubelet.h), the fake API server
// and, for health, the agent on the fake NVML: the GPUs Gapless recorded are the GPUs the
// container gets.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "agent_process.h"
#include "fake_nvml.h"
#include "gapless/agent/agent.h"
#include "gapless/k8s/json_fields.h"
#include "kubeconfig.h"
#include "plugin_rig.h"

using namespace gapless;
using gapless::test::eventually;
using gapless::test::visible;
using nlohmann::json;
using namespace std::chrono_literals;

namespace {

const std::vector<std::string> kUuids = {"GPU-0a", "GPU-1b", "GPU-2c", "GPU-3d"};

std::vector<agent::GpuState> four_gpus() {
  std::vector<agent::GpuState> gpus;
  for (int i = 0; i < 4; ++i) {
    agent::GpuState g;
    g.index = i;
    g.uuid = kUuids[i];
    g.numa = i / 2;
    gpus.push_back(g);
  }
  return gpus;
}

struct Grant {
  int gpu;
  std::int64_t memory_mib = 0;
  int compute_milli = 0;
};

// A pod bound to node "gpu-1" at `bound` (the PodScheduled time), its containers asking
// `asks` of `resource`, with an allocation record naming `grants` unless that is empty.
json pod(const std::string& name, const std::string& bound, std::vector<int> asks,
         const std::vector<Grant>& grants, const std::string& resource = "nvidia.com/gpu") {
  model::Allocation a = test::record_of(name);
  for (const Grant& g : grants) {
    a.gpus.push_back({g.gpu, kUuids[g.gpu], g.memory_mib, g.compute_milli, 0});
  }
  json containers = json::array();
  for (std::size_t i = 0; i < asks.size(); ++i) {
    containers.push_back({{"name", "c" + std::to_string(i)},
                          {"resources", {{"limits", {{resource, std::to_string(asks[i])}}}}}});
  }
  return test::bound_pod(name, bound, std::move(containers), grants.empty() ? nullptr : &a);
}

struct Rig : test::PluginFakes {
  explicit Rig(int slots = 0) : slots(slots) { start(); }

  void start() {
    agent::DevicePluginOptions o = options(resource());
    o.share_slots = slots;
    plugin = std::make_unique<agent::DevicePlugin>(o, client, [this](const std::string& l) {
      std::lock_guard lock(mu);
      log.push_back(l);
    });
    plugin->set_gpus(gpus);
    PluginFakes::start(*plugin, resource(), devices());
  }
  std::string resource() const {
    return slots > 0 ? agent::kSharedGpuResource : agent::kWholeGpuResource;
  }
  std::size_t devices() const { return gpus.size() * static_cast<std::size_t>(std::max(1, slots)); }
  test::FakeKubelet::Admitted admit(int count) { return kubelet.admit(resource(), count); }

  int slots;
  std::vector<agent::GpuState> gpus = four_gpus();
  std::mutex mu;
  std::vector<std::string> log;
  std::unique_ptr<agent::DevicePlugin> plugin;
};

}  // namespace

TEST_CASE("the plugin registers nvidia.com/gpu with GPU UUIDs as devices", "[deviceplugin]") {
  Rig rig;
  const auto req = rig.kubelet.requests().at(0);
  CHECK(req.version() == "v1beta1");
  CHECK(req.resource_name() == "nvidia.com/gpu");
  CHECK(req.endpoint() == "gapless-nvidia.com-gpu.sock");
  CHECK(req.options().get_preferred_allocation_available());
  const auto devices = rig.kubelet.devices("nvidia.com/gpu");
  for (const auto& uuid : kUuids) CHECK(devices.at(uuid) == "Healthy");
}

TEST_CASE("whole-GPU pods admitted in sequence get exactly their records' GPUs", "[deviceplugin]") {
  Rig rig;
  rig.api.add_pod(pod("a", "2026-11-23T10:00:01Z", {2}, {{2}, {3}}));
  auto a = rig.admit(2);
  REQUIRE(a.ok);
  CHECK(a.ids == std::vector<std::string>{"GPU-2c", "GPU-3d"});  // steered by the preference
  CHECK(visible(a) == "GPU-2c,GPU-3d");
  rig.api.update_pod("ml", "a", [](json& p) { p["status"]["phase"] = "Running"; });
  rig.api.add_pod(pod("b", "2026-11-23T10:00:05Z", {1}, {{1}}));
  auto b = rig.admit(1);
  REQUIRE(b.ok);
  CHECK(b.ids == std::vector<std::string>{"GPU-1b"});
  CHECK(visible(b) == "GPU-1b");
}

TEST_CASE("pods pending together are told apart by size, never by time", "[deviceplugin]") {
  Rig rig;
  rig.api.add_pod(pod("first", "2026-11-23T10:00:01Z", {1}, {{3}}));
  rig.api.add_pod(pod("pair", "2026-11-23T10:00:03Z", {2}, {{1}, {2}}));
  CHECK(visible(rig.admit(2)) == "GPU-1b,GPU-2c");
  // A second 1-GPU pod pending beside "first": no guessing, the admission fails.
  rig.api.add_pod(pod("second", "2026-11-23T10:00:02Z", {1}, {{0}}));
  auto refused = rig.admit(1);
  CHECK_FALSE(refused.ok);
  CHECK_THAT(refused.error, Catch::Contains("cannot tell which pod"));
  // "first" was allocated meanwhile (its annotation): "second" is the only candidate.
  rig.api.update_pod("ml", "first",
                     [](json& p) { p["metadata"]["annotations"]["gapless.io/allocated"] = "{}"; });
  CHECK(visible(rig.admit(1)) == "GPU-0a");
}

TEST_CASE("the plugin marks a pod allocated after its last container", "[deviceplugin]") {
  Rig rig;
  rig.api.add_pod(pod("two", "2026-11-23T10:00:01Z", {1, 1}, {{3}, {0}}));
  CHECK(visible(rig.admit(1)) == "GPU-3d");
  auto annotations = [&] { return (*rig.api.pod("ml", "two"))["metadata"]["annotations"]; };
  CHECK_FALSE(annotations().contains("gapless.io/allocated"));
  CHECK(visible(rig.admit(1)) == "GPU-0a");
  REQUIRE(annotations().contains("gapless.io/allocated"));
  const json value = json::parse(annotations()["gapless.io/allocated"].get<std::string>());
  CHECK(value == json{{"v", 1},
                      {"resource", "nvidia.com/gpu"},
                      {"containers", {{"c0", {"GPU-3d"}}, {"c1", {"GPU-0a"}}}}});
}

TEST_CASE("devices the kubelet passed that are not the record's are refused", "[deviceplugin]") {
  Rig rig(4);
  const std::string shared = "gapless.io/gpu-shared-count";
  rig.api.add_pod(pod("s", "2026-11-23T10:00:01Z", {1}, {{2, 8192, 300}}, shared));
  // The kubelet's accounting has every slot of GPU 2 taken: it passes a slot on another GPU.
  v1beta1::AllocateRequest req;
  req.add_container_requests()->add_devices_ids("GPU-1b::0");
  auto stub = v1beta1::DevicePlugin::NewStub(
      grpc::CreateChannel("unix:" + rig.plugin->socket_path(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  v1beta1::AllocateResponse resp;
  const grpc::Status s = stub->Allocate(&ctx, req, &resp);
  CHECK_FALSE(s.ok());
  CHECK_THAT(s.error_message(), Catch::Contains("the kubelet allocated GPU-1b"));
  CHECK_THAT(s.error_message(), Catch::Contains("record gives it GPU-2c"));
}

TEST_CASE("records find their GPUs by UUID after a reboot renumbers them", "[deviceplugin]") {
  Rig rig;
  // After the reboot NVML enumerates the GPUs in another order: GPU-2c is index 0 now.
  std::reverse(rig.gpus.begin(), rig.gpus.end());
  for (int i = 0; i < 4; ++i) rig.gpus[i].index = i;
  rig.plugin->set_gpus(rig.gpus);
  // The record, written before, says index 2 and UUID GPU-2c.
  rig.api.add_pod(pod("a", "2026-11-23T10:00:01Z", {1}, {{2}}));
  auto a = rig.admit(1);
  REQUIRE(a.ok);
  CHECK(a.ids == std::vector<std::string>{"GPU-2c"});
  CHECK(visible(a) == "GPU-2c");
}

TEST_CASE("each container of a pod gets its own part of the record", "[deviceplugin]") {
  Rig rig;
  rig.api.add_pod(pod("two", "2026-11-23T10:00:01Z", {1, 1}, {{3}, {0}}));
  CHECK(visible(rig.admit(1)) == "GPU-3d");
  CHECK(visible(rig.admit(1)) == "GPU-0a");
}

TEST_CASE("a pod without a record gets the GPUs the kubelet chose", "[deviceplugin]") {
  Rig rig;
  rig.api.add_pod(pod("plain", "2026-11-23T10:00:01Z", {2}, {}));
  auto a = rig.admit(2);
  REQUIRE(a.ok);
  REQUIRE(a.ids.size() == 2);
  CHECK(visible(a) == a.ids[0] + "," + a.ids[1]);
  // No pending pod at all (the API lists none): still the kubelet's choice.
  auto b = rig.admit(1);
  REQUIRE(b.ok);
  CHECK(visible(b) == b.ids.at(0));
  CHECK(b.ids[0] != a.ids[0]);
  CHECK(b.ids[0] != a.ids[1]);
}

TEST_CASE("a restarted plugin re-registers and keeps its allocations", "[deviceplugin]") {
  Rig rig;
  rig.api.add_pod(pod("a", "2026-11-23T10:00:01Z", {1}, {{2}}));
  CHECK(visible(rig.admit(1)) == "GPU-2c");
  // "a" is still Pending (its container has not started) when the plugin restarts.
  rig.plugin.reset();
  rig.start();
  CHECK(rig.kubelet.registrations() == 2);
  rig.api.add_pod(pod("b", "2026-11-23T10:00:02Z", {1}, {{0}}));
  CHECK(visible(rig.admit(1)) == "GPU-0a");  // not "a"'s record again: the checkpoint knows it

  SECTION("and a restarted kubelet gets a registration again") {
    rig.kubelet.restart();
    REQUIRE(eventually([&] { return rig.kubelet.registrations() == 3; }));
    REQUIRE(eventually([&] { return rig.kubelet.devices("nvidia.com/gpu").size() == 4; }));
    rig.api.add_pod(pod("c", "2026-11-23T10:00:03Z", {1}, {{3}}));
    CHECK(visible(rig.admit(1)) == "GPU-3d");
  }
  SECTION("a deleted pod leaves the checkpoint") {
    rig.api.delete_pod("ml", "a");
    rig.api.add_pod(pod("c", "2026-11-23T10:00:03Z", {1}, {{3}}));
    CHECK(visible(rig.admit(1)) == "GPU-3d");
    std::ifstream in(rig.dir.file("gapless/gapless-nvidia.com-gpu.checkpoint.json"));
    const json cp = json::parse(in);
    std::set<std::string> uids;
    for (const auto& e : cp["containers"]) uids.insert(e["uid"].get<std::string>());
    CHECK(uids == std::set<std::string>{"uid-b", "uid-c"});
  }
}

TEST_CASE("an unhealthy GPU is reported and never handed out", "[deviceplugin]") {
  Rig rig;
  rig.gpus[1].healthy = false;
  rig.plugin->set_gpus(rig.gpus);
  REQUIRE(
      eventually([&] { return rig.kubelet.devices("nvidia.com/gpu")["GPU-1b"] == "Unhealthy"; }));
  SECTION("a record that names it fails the admission") {
    rig.api.add_pod(pod("broken", "2026-11-23T10:00:01Z", {1}, {{1}}));
    auto a = rig.admit(1);
    CHECK_FALSE(a.ok);
    CHECK_THAT(a.error, Catch::Contains("GPU-1b is unhealthy"));
  }
  SECTION("the kubelet's choice never includes it") {
    rig.api.add_pod(pod("plain", "2026-11-23T10:00:01Z", {3}, {}));
    auto a = rig.admit(3);
    REQUIRE(a.ok);
    CHECK(visible(a) == "GPU-0a,GPU-2c,GPU-3d");
    CHECK_FALSE(rig.admit(1).ok);  // nothing healthy left
  }
}

TEST_CASE("health comes from the agent's scans", "[deviceplugin]") {
  test::TempDir events_dir;
  const std::string events = events_dir.write("events", "");
  test::configure_fake_nvml(test::nvml_fixture("t4-4"), events);
  agent::AgentOptions o;
  o.nvml_library = GAPLESS_FAKE_NVML;
  agent::AgentMetrics metrics;
  agent::Agent a(o, nullptr, metrics, nullptr);
  Rig rig;
  a.on_scan([&](const agent::NodeGpus& node) { rig.plugin->set_gpus(node.gpus); });
  REQUIRE(a.tick().ok());
  const std::string lost = "GPU-2b7f0152-5cd0-e733-981c-3ffc281e9f61";  // index 2 of t4-4
  REQUIRE(eventually([&] { return rig.kubelet.devices("nvidia.com/gpu")[lost] == "Healthy"; }));
  std::ofstream(events, std::ios::app) << "lost 2\n";
  REQUIRE(a.tick().ok());
  CHECK(eventually([&] { return rig.kubelet.devices("nvidia.com/gpu")[lost] == "Unhealthy"; }));
}

TEST_CASE("share pods get their record's GPU and the limits of MPS and HAMi-core",
          "[deviceplugin]") {
  Rig rig(4);
  CHECK(rig.kubelet.requests().at(0).resource_name() == "gapless.io/gpu-shared-count");
  CHECK(rig.kubelet.devices("gapless.io/gpu-shared-count").count("GPU-2c::3") == 1);
  const std::string shared = "gapless.io/gpu-shared-count";
  // Two share pods onto GPU 2, one after the other (the bind gate keeps them apart), then one
  // onto GPU 0.
  rig.api.add_pod(pod("s1", "2026-11-23T10:00:01Z", {1}, {{2, 8192, 300}}, shared));
  auto a = rig.admit(1);
  REQUIRE(a.ok);
  CHECK(a.ids.at(0).rfind("GPU-2c::", 0) == 0);  // a slot on the record's GPU
  CHECK(a.env == std::map<std::string, std::string>{{"NVIDIA_VISIBLE_DEVICES", "GPU-2c"},
                                                    {"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", "0=8192M"},
                                                    {"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "30"},
                                                    {"CUDA_DEVICE_MEMORY_LIMIT_0", "8192m"},
                                                    {"CUDA_DEVICE_SM_LIMIT", "30"}});
  rig.api.add_pod(pod("s2", "2026-11-23T10:00:02Z", {1}, {{2, 4096, 0}}, shared));
  auto b = rig.admit(1);
  REQUIRE(b.ok);
  CHECK(b.ids.at(0).rfind("GPU-2c::", 0) == 0);
  CHECK(b.env == std::map<std::string, std::string>{{"NVIDIA_VISIBLE_DEVICES", "GPU-2c"},
                                                    {"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", "0=4096M"},
                                                    {"CUDA_DEVICE_MEMORY_LIMIT_0", "4096m"}});
  rig.api.add_pod(pod("s3", "2026-11-23T10:00:03Z", {2}, {{0, 1024, 500}, {3, 1024, 500}}, shared));
  auto c = rig.admit(2);
  REQUIRE(c.ok);
  CHECK(c.env.at("NVIDIA_VISIBLE_DEVICES") == "GPU-0a,GPU-3d");
  CHECK(c.env.at("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT") == "0=1024M,1=1024M");
  CHECK(c.env.at("CUDA_DEVICE_MEMORY_LIMIT_1") == "1024m");
  CHECK(c.env.at("CUDA_DEVICE_SM_LIMIT") == "50");
}

TEST_CASE("a MIG-enabled GPU is not a whole GPU for the kubelet", "[deviceplugin]") {
  Rig rig;
  rig.gpus[3].mig_enabled = true;
  rig.plugin->set_gpus(rig.gpus);
  REQUIRE(eventually([&] { return rig.kubelet.devices("nvidia.com/gpu").size() == 3; }));
  CHECK(rig.kubelet.devices("nvidia.com/gpu").count("GPU-3d") == 0);
  rig.api.add_pod(pod("old-record", "2026-11-23T10:00:01Z", {1}, {{3}}));
  auto a = rig.admit(1);
  CHECK_FALSE(a.ok);
  CHECK_THAT(a.error, Catch::Contains("not served here"));
}

namespace {

// The Node's gapless.io/device-plugin annotation, "" when absent.
std::string plugin_annotation(const test::FakeApiServer& api, const std::string& node) {
  const auto n = api.node(node);
  if (!n) return "?";
  const json* v = k8s::field_path(*n, {"metadata", "annotations", "gapless.io/device-plugin"});
  return v != nullptr && v->is_string() ? v->get<std::string>() : "";
}

}  // namespace

TEST_CASE("gapless-agent --device-plugin serves both resources from its NVML scans",
          "[deviceplugin]") {
  test::TempDir dir;
  test::FakeApiServer api;
  api.add_node({{"metadata", {{"name", "gpu-7"}}}});
  test::FakeKubelet kubelet(dir.path().string());
  const std::string kubeconfig = test::write_token_kubeconfig(dir, api.url(), "t");
  const std::string config = test::nvml_fixture("t4-4");
  const std::string plugin_dir = dir.path().string();
  const std::string err = dir.file("stderr");
  const pid_t pid =
      test::spawn_agent({"--device-plugin", "--device-plugin-dir", plugin_dir, "--share-slots", "2",
                         "--kubeconfig", kubeconfig, "--nvml-library", GAPLESS_FAKE_NVML,
                         "--listen", "127.0.0.1:0", "--node-name", "gpu-7"},
                        config, err);
  REQUIRE(pid >= 0);
  const std::string t4_0 = "GPU-09c56a22-964e-9ef6-8414-fa99e6bbf69e";
  const bool up = eventually(
      [&] {
        return kubelet.devices("nvidia.com/gpu").size() == 4 &&
               kubelet.devices("gapless.io/gpu-shared-count").size() == 8;
      },
      10s);
  model::Allocation a;
  a.pod_uid = "uid-p";
  a.pod_ns = "ml";
  a.pod_name = "p";
  a.node = "gpu-7";
  a.gpus.push_back({0, t4_0, 0, 0, 0});
  json p = pod("p", "2026-11-23T10:00:01Z", {1}, {});
  p["spec"]["nodeName"] = "gpu-7";
  p["metadata"]["annotations"] = {
      {std::string(k8s::kAllocationAnnotation), k8s::encode_allocation_record(a)}};
  api.add_pod(p);
  const auto admitted = up ? kubelet.admit("nvidia.com/gpu", 1) : test::FakeKubelet::Admitted{};
  // Registered: the agent says so on its Node, so the extender gates binds there.
  const bool announced = eventually(
      [&] {
        return plugin_annotation(api, "gpu-7") == "nvidia.com/gpu,gapless.io/gpu-shared-count";
      },
      10s);
  const int status = test::stop_agent(pid);
  REQUIRE(status != -1);
  INFO(std::ifstream(err).rdbuf());
  REQUIRE(up);
  CHECK(admitted.env.at("NVIDIA_VISIBLE_DEVICES") == t4_0);
  CHECK(announced);
  CHECK(plugin_annotation(api, "gpu-7") == "");  // stopped: the node is no longer gated
  // No GPU Feature Discovery here: the agent labelled the product, as GFD would have.
  CHECK((*api.node("gpu-7"))["metadata"]["labels"].value("nvidia.com/gpu.product", "") ==
        "Tesla-T4");
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

TEST_CASE("gapless-agent without --device-plugin removes the announcement an earlier run left",
          "[deviceplugin]") {
  test::TempDir dir;
  test::FakeApiServer api;
  api.add_node(
      {{"metadata",
        {{"name", "gpu-7"}, {"annotations", {{"gapless.io/device-plugin", "nvidia.com/gpu"}}}}}});
  const std::string kubeconfig = test::write_token_kubeconfig(dir, api.url(), "t");
  const std::string err = dir.file("stderr");
  const pid_t pid =
      test::spawn_agent({"--kubeconfig", kubeconfig, "--nvml-library", GAPLESS_FAKE_NVML,
                         "--listen", "127.0.0.1:0", "--node-name", "gpu-7"},
                        test::nvml_fixture("t4-4"), err);
  REQUIRE(pid >= 0);
  const bool removed = eventually([&] { return plugin_annotation(api, "gpu-7").empty(); }, 10s);
  const int status = test::stop_agent(pid);
  INFO(std::ifstream(err).rdbuf());
  CHECK(removed);
  CHECK(status != -1);
}

TEST_CASE("without the API server the plugin refuses rather than guesses", "[deviceplugin]") {
  Rig rig;
  rig.api.add_pod(pod("a", "2026-11-23T10:00:01Z", {1}, {{2}}));
  // GetPreferredAllocation's list and Allocate's list both fail.
  rig.api.fail_next("GET", "/api/v1/pods", 2, 503, "apiserver down");
  auto a = rig.admit(1);
  CHECK_FALSE(a.ok);
  CHECK_THAT(a.error, Catch::Contains("listing this node's pods"));
  CHECK_THAT(a.error, Catch::Contains("apiserver down"));
  CHECK(visible(rig.admit(1)) == "GPU-2c");  // the next try, with the API back
}

TEST_CASE("a plugin started before the kubelet registers once kubelet.sock appears",
          "[deviceplugin]") {
  test::TempDir dir;
  test::FakeApiServer api;
  k8s::ApiClient client(api.client_config());
  // A checkpoint that cannot be read: logged, and the plugin starts empty.
  std::filesystem::create_directories(dir.path() / "gapless");
  dir.write("gapless/gapless-nvidia.com-gpu.checkpoint.json", "{not json");
  std::mutex mu;
  std::vector<std::string> log;
  agent::DevicePluginOptions o;
  o.plugin_dir = dir.path().string();
  o.node_name = "gpu-1";
  o.recheck = 20ms;
  agent::DevicePlugin plugin(o, client, [&](const std::string& l) {
    std::lock_guard lock(mu);
    log.push_back(l);
  });
  plugin.set_gpus(four_gpus());
  REQUIRE(plugin.start().ok());
  CHECK(plugin.registrations() == 0);
  test::FakeKubelet kubelet(dir.path().string());
  REQUIRE(eventually([&] { return kubelet.devices("nvidia.com/gpu").size() == 4; }));
  // The plugin counts its registration when the kubelet's answer is back, which may come after
  // the kubelet has already connected and read the devices.
  CHECK(eventually([&] { return plugin.registrations() == 1; }));
  std::lock_guard lock(mu);
  REQUIRE_FALSE(log.empty());
  CHECK_THAT(log.front(), Catch::Contains("starting with an empty checkpoint"));
}
