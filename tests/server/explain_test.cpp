// POST /debug/explain against the demo cluster: per node verdicts, score terms, the pick bind
// would make, and no change to the model.
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
