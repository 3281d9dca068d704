// POST /debug/explain against the demo cluster: per node verdicts, score terms, the pick bind
// would make, and no change to the model.
#include "../placement/test_nodes.h"
#include "test_server.h"

namespace gapless::test {
namespace {

const json* explained(const json& r, const std::string& node) {
  for (const json& n : r.at("Nodes")) {
    if (n.at("Node") == node) return &n;
  }
  return nullptr;
}

}  // namespace

TEST_CASE("explain: every node gets a verdict, passing nodes their score terms and pick") {
  const std::vector<std::string> all = node_names(demo_cluster());
  TestServer srv(demo_cluster());
  const std::string args = extender_args(gpu_pod("train", "uid-explain-1", 2), all);
  const json r = srv.call("/debug/explain", args);
  INFO(r.dump(2));
  REQUIRE(r.at("Error") == "");
  CHECK(r.at("Pod") == "default/train");
  CHECK(r.at("Profile") == "default");
  REQUIRE(r.at("Nodes").size() == all.size());

  // The verdicts are filter's, the 0..10 scores prioritize's.
  const json f = srv.call("/filter", args);
  const json p = srv.call("/prioritize", args);
  int tens = 0;
  for (const json& n : r.at("Nodes")) {
    const std::string name = n.at("Node");
    const bool passed = n.at("Verdict") == "passed";
    const auto& names = f.at("NodeNames");
    CHECK(passed == (std::find(names.begin(), names.end(), json(name)) != names.end()));
    if (!passed) {
      CHECK_FALSE(n.at("Reason").get<std::string>().empty());
      CHECK(n.at("Placement").is_null());
      continue;
    }
    for (const json& h : p) {
      if (h.at("Host") == name) CHECK(h.at("Score") == n.at("Score"));
    }
    tens += n.at("Score") == 10 ? 1 : 0;
    // The raw score is the weighted mean of the terms.
    double sum = 0, weights = 0;
    json terms = n.at("Components").at("Node");
    for (const char* k : {"Gpu", "Connectivity", "IslandKept"}) {
      if (!n.at("Components").at(k).is_null()) terms.push_back(n.at("Components").at(k));
    }
    for (const json& t : terms) {
      sum += t.at("Weight").get<double>() * t.at("Score").get<double>();
      weights += t.at("Weight").get<double>();
    }
    CHECK(n.at("RawScore").get<double>() == Approx(sum / weights));
    CHECK(n.at("Placement").at("Gpus").size() == 2);
  }
  CHECK(tens == 1);
  CHECK(explained(r, "a100-mig-01")->at("Verdict") == "unresolvable");  // MIG: no 2 whole GPUs
}

TEST_CASE("explain: the pick is what bind then commits") {
  TestServer srv(demo_cluster());
  const json pod = gpu_pod("pick", "uid-explain-2", 2);
  const json r = srv.call("/debug/explain", extender_args(pod, {"h100-nvs-01"}));
  REQUIRE(r.at("Nodes").size() == 1);
  const json gpus = r.at("Nodes")[0].at("Placement").at("Gpus");
  REQUIRE(srv.filter_and_bind(pod, "h100-nvs-01") == "");
  const json state = json::parse(srv.get("/debug/state").body);
  REQUIRE(state.at("allocations").size() == 1);
  const json record = state.at("allocations")[0].at("record");
  INFO(record.dump() << " vs " << gpus.dump());
  std::set<std::string> picked, bound;
  for (const json& g : gpus) picked.insert(g.at("Uuid").get<std::string>());
  for (const json& n : state.at("nodes")) {
    if (n.at("name") != "h100-nvs-01") continue;
    for (const json& g : n.at("gpus")) {
      if (g.at("used").at("whole") == true) bound.insert(g.at("uuid").get<std::string>());
    }
  }
  CHECK(picked == bound);
}

TEST_CASE("explain: changes nothing, not even the learned mix") {
  const std::vector<std::string> all = node_names(demo_cluster());
  TestServer srv(demo_cluster());
  const std::string before = srv.get("/debug/state").body;
  for (int gpus : {1, 2, 8}) {
    srv.call("/debug/explain",
             extender_args(
                 gpu_pod("p" + std::to_string(gpus), "uid-x" + std::to_string(gpus), gpus), all));
  }
  CHECK(srv.get("/debug/state").body == before);
}

TEST_CASE("explain: full mode and a shared-GPU pod") {
  TestServer srv(demo_cluster());
  json items =
      json::array({{{"metadata", {{"name", "t4-01"}}}}, {{"metadata", {{"name", "nowhere"}}}}});
  const json pod = test::pod("share", "uid-share", {{"gapless.io/gpu-memory", "4096"}});
  const json body = {{"Pod", pod}, {"Nodes", {{"items", items}}}, {"NodeNames", nullptr}};
  const json r = srv.call("/debug/explain", body.dump());
  INFO(r.dump(2));
  REQUIRE(r.at("Error") == "");
  CHECK(explained(r, "nowhere")->at("Verdict") == "unresolvable");
  const json* t4 = explained(r, "t4-01");
  REQUIRE(t4->at("Verdict") == "passed");
  CHECK(t4->at("Placement").at("Gpus")[0].at("MemoryMiB") == 4096);
}

TEST_CASE("explain: bad bodies answer 200 with Error, as filter does") {
  TestServer srv(demo_cluster());
  for (const std::string body : {"", "not json", "[]", "{}", R"({"Pod": 3})"}) {
    const json r = srv.call("/debug/explain", body);
    INFO(body << " -> " << r.dump());
    CHECK_FALSE(r.at("Error").get<std::string>().empty());
    CHECK(r.at("Nodes").is_null());
  }
}

}  // namespace gapless::test

namespace gapless::test {
namespace {

// a: 5 fixed GPUs and a movable 2-GPU pod; c: 6 fixed GPUs. A 3-GPU pod fits neither.
model::Cluster crowded() {
  model::Cluster c;
  c.upsert_node(testnodes::h100_nvswitch("a"));
  c.upsert_node(testnodes::h100_nvswitch("c"));
  auto held = [&](const std::string& uid, const std::string& node, std::vector<int> gpus,
                  model::Movability movable) {
    model::Allocation a = testnodes::alloc(uid, node);
    for (int i : gpus) a.gpus.push_back(testnodes::whole_grant(i));
    a.movable = movable;
    REQUIRE(c.commit(a));
  };
  held("a-fixed", "a", {0, 1, 2, 3, 4}, model::Movability::kNever);
  held("a1", "a", {5, 6}, model::Movability::kOptedIn);
  held("c-fixed", "c", {0, 1, 2, 3, 4, 5}, model::Movability::kNever);
  return c;
}

}  // namespace

TEST_CASE("explain: consolidation's plan and why, when the policy turns it on") {
  placement::Policy on = placement::builtin_policy();
  on.consolidation.enabled = true;
  TestServer srv(crowded(), on);
  const std::string args = extender_args(gpu_pod("big", "uid-big", 3), {"a", "c"});
  const json r = srv.call("/debug/explain", args);
  INFO(r.dump(2));
  REQUIRE(r.at("Error") == "");
  const json& c = r.at("Consolidation");
  REQUIRE(c.at("Plan").is_object());
  CHECK(c.at("Plan").at("Node") == "a");
  REQUIRE(c.at("Plan").at("Moves").size() == 1);
  CHECK(c.at("Plan").at("Moves")[0].at("Pod") == "default/pod-a1");
  CHECK(c.at("Plan").at("Moves")[0].at("To") == "c");
  CHECK(c.at("DryRun") == false);
  CHECK(c.at("NodesConsidered") == 1);
  CHECK_THAT(c.at("Why").get<std::string>(), Catch::Contains("chosen: evict 1 pod(s) from a"));
  // Explain moves nothing.
  const json again = srv.call("/debug/explain", args);
  CHECK(again.at("Consolidation").at("Plan") == c.at("Plan"));

  TestServer off(crowded());
  CHECK_FALSE(off.call("/debug/explain", args).contains("Consolidation"));
}

}  // namespace gapless::test
