// The drift check end to end on fakes: a fake kubelet PodResources server (gRPC on a Unix socket
// in a temp dir), the fake API server and the fake NVML. Shows what a user sees when the kubelet
// assigned other devices than the records say (a swap between two pods) or a pod without a
// record holds a GPU: the GaplessDrift Event, the metrics, the "inUseBy" fence in the topology
// annotation, and that the extender's model, reading that annotation, no longer offers the GPU.
#include <grpcpp/grpcpp.h>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include "eventually.h"
#include "fake_api_server.h"
#include "fake_nvml.h"
#include "gapless/agent/agent.h"
#include "gapless/agent/drift_monitor.h"
#include "gapless/agent/topology_annotation.h"
#include "gapless/cli/views.h"
#include "gapless/k8s/allocation_record.h"
#include "gapless/k8s/json_fields.h"
#include "gapless/k8s/node_inventory.h"
#include "gapless/model/cluster.h"
#include "gapless/server/extender.h"
#include "podresources/v1/api.grpc.pb.h"
#include "temp_dir.h"

namespace {

using namespace gapless;
using nlohmann::json;

// The kubelet's PodResources service, answering List with what the test set.
class FakePodResources final : public v1::PodResourcesLister::Service {
 public:
  explicit FakePodResources(const std::string& socket) {
    std::filesystem::create_directories(std::filesystem::path(socket).parent_path());
    std::filesystem::remove(socket);  // a restarted kubelet's socket is a new file
    grpc::ServerBuilder builder;
    builder.AddListeningPort("unix:" + socket, grpc::InsecureServerCredentials());
    builder.RegisterService(this);
    server_ = builder.BuildAndStart();
    REQUIRE(server_ != nullptr);
  }
  ~FakePodResources() override { server_->Shutdown(); }

  void set(std::vector<agent::AssignedPod> pods) {
    std::lock_guard lock(mu_);
    pods_ = std::move(pods);
  }

  grpc::Status List(grpc::ServerContext*, const v1::ListPodResourcesRequest*,
                    v1::ListPodResourcesResponse* out) override {
    std::lock_guard lock(mu_);
    for (const auto& p : pods_) {
      auto* pod = out->add_pod_resources();
      pod->set_namespace_(p.ns);
      pod->set_name(p.name);
      for (const auto& c : p.containers) {
        auto* container = pod->add_containers();
        container->set_name(c.name);
        for (const auto& d : c.devices) {
          auto* devices = container->add_devices();
          devices->set_resource_name(d.resource);
          for (const auto& id : d.ids) devices->add_device_ids(id);
        }
      }
    }
    return grpc::Status::OK;
  }

 private:
  std::unique_ptr<grpc::Server> server_;
  std::mutex mu_;
  std::vector<agent::AssignedPod> pods_;
};

std::vector<std::string> fixture_uuids() {
  std::ifstream in(test::nvml_fixture("dgx1-v100"));
  const json doc = json::parse(in);
  std::vector<std::string> out;
  for (const auto& g : doc.at("gpus")) out.push_back(g.at("uuid"));
  return out;
}

model::Allocation record(const std::string& name, int index, const std::string& uuid);

// A whole-GPU pod in namespace ml bound to gpu-1, Running, with a record naming GPU `index`
// (none: no record).
json running_pod(const std::string& name, std::optional<int> index, const std::string& uuid) {
  json meta = {{"name", name}, {"namespace", "ml"}, {"uid", "uid-" + name}};
  if (index) {
    meta["annotations"] = {{std::string(k8s::kAllocationAnnotation),
                            k8s::encode_allocation_record(record(name, *index, uuid))}};
  }
  return {{"metadata", meta},
          {"spec",
           {{"nodeName", "gpu-1"},
            {"containers",
             {{{"name", "main"}, {"resources", {{"limits", {{"nvidia.com/gpu", "1"}}}}}}}}}},
          {"status", {{"phase", "Running"}}}};
}

agent::AssignedPod holding(const std::string& name, const std::string& uuid) {
  return {"ml", name, {{"main", {{"nvidia.com/gpu", {uuid}}}}}};
}

// An agent on the fake DGX-1 publishing node gpu-1, with the drift check on.
struct Rig {
  Rig() : client(api.client_config()), publisher(client, "gpu-1") {
    api.add_node({{"metadata", {{"name", "gpu-1"}}}});
    test::configure_fake_nvml(test::nvml_fixture("dgx1-v100"));
    agent::AgentOptions o;
    o.nvml_library = GAPLESS_FAKE_NVML;
    o.node_label = "gpu-1";
    a = std::make_unique<agent::Agent>(o, &publisher, metrics, nullptr);
    drift = std::make_unique<agent::DriftMonitor>(agent::DriftMonitorOptions{"gpu-1", socket},
                                                  client, metrics, nullptr);
    a->check_in_use([this](const agent::NodeGpus& node) {
      std::map<int, std::string> uuids;
      for (const auto& g : node.gpus) uuids[g.index] = g.uuid;
      auto fences = drift->check(uuids);
      return fences.ok() ? *fences : drift->fences();
    });
  }

  json published_gpus() const {
    auto n = api.node("gpu-1");
    REQUIRE(n);
    const json* text = k8s::field_path(*n, {"metadata", "annotations", agent::kTopologyAnnotation});
    REQUIRE(text != nullptr);
    return json::parse(text->get<std::string>()).at("gpus");
  }

  std::vector<json> drift_events() const {
    std::vector<json> out;
    for (const json& e : api.events()) {
      if (e.value("reason", "") == agent::kDriftEventReason) out.push_back(e);
    }
    return out;
  }

  // The node as the extender reads it from the API server (node_inventory.h).
  model::Node extender_node() const {
    auto n = api.node("gpu-1");
    REQUIRE(n);
    auto node = k8s::node_from_json(*n);
    INFO((node.ok() ? "" : node.error()));
    REQUIRE(node.ok());
    return std::move(node).value();
  }

  bool metric_has(const std::string& line) const {
    return metrics.serialize().find(line + "\n") != std::string::npos;  // the whole sample
  }

  test::TempDir dir;
  std::string socket = (dir.path() / "pod-resources" / "kubelet.sock").string();
  test::FakeApiServer api;
  k8s::ApiClient client;
  agent::NodePublisher publisher;
  agent::AgentMetrics metrics;
  std::unique_ptr<agent::Agent> a;
  std::unique_ptr<agent::DriftMonitor> drift;
};

model::Allocation record(const std::string& name, int index, const std::string& uuid) {
  model::Allocation a;
  a.pod_uid = "uid-" + name;
  a.pod_ns = "ml";
  a.pod_name = name;
  a.node = "gpu-1";
  a.gpus = {{index, uuid, 0, 0, 0}};
  return a;
}

// The extender on a model, with the built-in policy.
struct Extender {
  explicit Extender(model::Cluster cluster)
      : extender(std::move(cluster), placement::builtin_policy(), binder, metrics) {}
  k8s::InMemoryBinder binder;
  server::Metrics metrics;
  server::Extender extender;
};

// A pending pod asking for `gpus` whole GPUs, and the ExtenderArgs naming node gpu-1.
json gpu_pod(int gpus) {
  return {{"metadata", {{"name", "new"}, {"namespace", "ml"}, {"uid", "uid-new"}}},
          {"spec",
           {{"containers",
             {{{"name", "main"},
               {"resources", {{"limits", {{"nvidia.com/gpu", std::to_string(gpus)}}}}}}}}}},
          {"status", {{"phase", "Pending"}}}};
}
// Whether a filter answer keeps node gpu-1.
bool passes(const json& filtered) {
  INFO(filtered.dump());
  REQUIRE(filtered.value("Error", "") == "");
  const json names = filtered.value("NodeNames", json::array());
  return names.is_array() && std::find(names.begin(), names.end(), "gpu-1") != names.end();
}
std::string args(const json& pod) {
  return json{{"Pod", pod}, {"Nodes", nullptr}, {"NodeNames", {"gpu-1"}}}.dump();
}

TEST_CASE("drift: two pods whose GPUs the kubelet swapped are reported and fenced",
          "[drift][agent]") {
  const auto uuids = fixture_uuids();
  Rig rig;
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

  // Without the fence the extender would offer GPU 0 (a's record, free in its model once a is
  // deleted) although b's container runs there: the double use of issue 25.
  {
    model::Node unfenced = rig.extender_node();
    for (auto& g : unfenced.gpus) g.in_use_by.clear();
    model::Cluster cluster;
    cluster.upsert_node(std::move(unfenced));
    REQUIRE(cluster.restore(record("b", 1, uuids[1])).ok());
    Extender ext(std::move(cluster));
    CHECK(passes(json::parse(ext.extender.filter(args(gpu_pod(7))))));
  }
  // The extender after pod a is deleted: pod b's record holds GPU 1, and GPU 0 (a's record)
  // is free in its model, but b's container really runs on it. It must not be offered.
  {
    model::Cluster cluster;
    cluster.upsert_node(rig.extender_node());
    REQUIRE(cluster.restore(record("b", 1, uuids[1])).ok());
    Extender ext(std::move(cluster));
    // 8 GPUs, 1 held, 1 fenced: a 7-GPU pod fails, a 1-GPU pod gets neither GPU 0 nor 1.
    const json filtered = json::parse(ext.extender.filter(args(gpu_pod(7))));
    CHECK_FALSE(passes(filtered));
    const json explained = json::parse(ext.extender.explain(args(gpu_pod(1))));
    const json& gpus = explained.at("Nodes").at(0).at("Placement").at("Gpus");
    REQUIRE(gpus.size() == 1);
    CHECK(gpus[0].at("Index") != 0);
    CHECK(gpus[0].at("Index") != 1);
    // /debug/state and kubectl gapless nodes show the fence and who holds the GPU.
    const json state = json::parse(ext.extender.debug_state());
    CHECK(state.at("nodes")[0].at("gpus")[0].at("inUseBy") == json::array({"ml/b/main"}));
    auto view = cli::render_nodes(state, "gpu-1");
    REQUIRE(view.ok());
    INFO(*view);
    CHECK_THAT(*view, Catch::Contains("  GPU 0  healthy  FENCED (drift): in use by ml/b/main\n"));
    CHECK_THAT(*view, Catch::Contains("  GPU 1  healthy  FENCED (drift): in use by ml/a/main  "
                                      "ml/b (whole)\n"));
    CHECK_THAT(*view, Catch::Contains("  GPU 2  healthy  free\n"));
  }

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
  Rig rig;
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

  // The extender's model has no allocation on GPU 0, and still does not offer it.
  Extender ext([&] {
    model::Cluster cluster;
    cluster.upsert_node(rig.extender_node());
    return cluster;
  }());
  const json explained = json::parse(ext.extender.explain(args(gpu_pod(1))));
  CHECK(explained.at("Nodes").at(0).at("Placement").at("Gpus").at(0).at("Index") != 0);
  const json filtered = json::parse(ext.extender.filter(args(gpu_pod(8))));
  CHECK_FALSE(passes(filtered));
}

TEST_CASE("drift: without the PodResources socket the check is skipped", "[drift][agent]") {
  Rig rig;  // no fake kubelet: the socket does not exist
  rig.api.add_pod(running_pod("other", std::nullopt, ""));
  REQUIRE(rig.a->tick().ok());
  CHECK(rig.drift_events().empty());
  for (const json& g : rig.published_gpus()) CHECK_FALSE(g.contains("inUseBy"));
}

TEST_CASE("drift: a failed read keeps the fences (no lift without a check that saw it end)",
          "[drift][agent]") {
  const auto uuids = fixture_uuids();
  Rig rig;
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
  Rig rig;  // polls every 30 s
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
  Rig rig;
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
