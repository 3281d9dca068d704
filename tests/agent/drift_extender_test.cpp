// The extender's side of the drift check: an agent (drift_rig.h) publishes the GPUs really in
// use that no record charges ("inUseBy" in gapless.io/gpu-topology); the extender, reading the
// Node as it does from the API server, must no longer offer them (filter, explain), and shows
// them in /debug/state and kubectl gapless nodes.
#include "drift_rig.h"
#include "gapless/cli/views.h"
#include "gapless/model/cluster.h"
#include "gapless/server/extender.h"

namespace {

using namespace gapless;
using namespace gapless::test::drift;
using nlohmann::json;

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

TEST_CASE("drift: the extender does not offer GPUs that pods swapped", "[drift][agent]") {
  const auto uuids = fixture_uuids();
  DriftRig rig;
  FakePodResources kubelet(rig.socket);
  rig.api.add_pod(running_pod("a", 0, uuids[0]));
  rig.api.add_pod(running_pod("b", 1, uuids[1]));
  kubelet.set({holding("a", uuids[1]), holding("b", uuids[0])});
  REQUIRE(rig.a->tick().ok());

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
}

TEST_CASE("drift: the extender does not offer a GPU a pod without record uses", "[drift][agent]") {
  const auto uuids = fixture_uuids();
  DriftRig rig;
  FakePodResources kubelet(rig.socket);
  rig.api.add_pod(running_pod("other", std::nullopt, ""));
  kubelet.set({holding("other", uuids[0])});
  REQUIRE(rig.a->tick().ok());

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

}  // namespace
