// The rule that tells which pod the kubelet is admitting (pod_match.h) and the checkpoint it
// keeps, without gRPC.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "gapless/agent/pod_match.h"
#include "gapless/k8s/allocation_record.h"
#include "temp_dir.h"

using namespace gapless;
using nlohmann::json;

namespace {

std::string record(const std::string& name, std::initializer_list<int> gpus,
                   const std::string& node = "n1") {
  model::Allocation a;
  a.pod_uid = "uid-" + name;
  a.pod_ns = "ml";
  a.pod_name = name;
  a.node = node;
  for (int g : gpus) a.gpus.push_back({g, "GPU-" + std::to_string(g), 0, 0, 0});
  return k8s::encode_allocation_record(a);
}

json container(const std::string& name, int gpus) {
  return {{"name", name}, {"resources", {{"limits", {{"nvidia.com/gpu", std::to_string(gpus)}}}}}};
}

json pod(const std::string& name, json containers, const std::string& rec = "",
         const std::string& bound = "2026-01-01T00:00:00Z", json init = json::array()) {
  json meta = {{"name", name},
               {"namespace", "ml"},
               {"uid", "uid-" + name},
               {"creationTimestamp", "2025-12-31T00:00:00Z"}};
  if (!rec.empty()) meta["annotations"] = {{"gapless.io/allocation", rec}};
  return {{"metadata", meta},
          {"spec", {{"nodeName", "n1"}, {"containers", containers}, {"initContainers", init}}},
          {"status",
           {{"phase", "Pending"},
            {"conditions",
             {{{"type", "PodScheduled"}, {"status", "True"}, {"lastTransitionTime", bound}}}}}}};
}

// `pods` as a vector: a braced single json would be copied, not wrapped in an array.
std::optional<agent::Admission> match(const std::vector<json>& pods, int count,
                                      const agent::AllocationCheckpoint& cp) {
  auto m = agent::match_admission({{"items", json(pods)}}, "n1", "nvidia.com/gpu",
                                  agent::GrantKind::kWhole, count, cp);
  INFO((m.ok() ? std::string() : m.error()));
  REQUIRE(m.ok());
  return *m;
}

std::vector<int> gpus(const agent::Admission& a) {
  std::vector<int> out;
  for (const auto& g : a.grants) out.push_back(g.index);
  return out;
}

}  // namespace

TEST_CASE("the one pending pod asking the size is matched; two alike are refused", "[podmatch]") {
  agent::AllocationCheckpoint cp("/nonexistent/cp.json");
  std::vector<json> pods = {
      pod("late", json::array({container("c", 1)}), record("late", {0}), "2026-01-01T00:00:09Z"),
      pod("two", json::array({container("c", 2)}), record("two", {2, 3}), "2026-01-01T00:00:00Z")};
  auto m = match(pods, 1, cp);
  REQUIRE(m);
  CHECK(m->pod_name == "late");
  CHECK(m->last);
  CHECK(gpus(*m) == std::vector<int>{0});
  CHECK(match(pods, 2, cp)->pod_name == "two");
  CHECK_FALSE(match(pods, 3, cp));
  // A second 1-GPU pod: bind times tell nothing (the kubelet sorts by creation second, unstably).
  pods.push_back(
      pod("early", json::array({container("c", 1)}), record("early", {1}), "2026-01-01T00:00:01Z"));
  auto both = agent::match_admission({{"items", json(pods)}}, "n1", "nvidia.com/gpu",
                                     agent::GrantKind::kWhole, 1, cp);
  REQUIRE_FALSE(both.ok());
  CHECK_THAT(both.error(), Catch::Contains("cannot tell which pod"));
  CHECK_THAT(both.error(), Catch::Contains("ml/late"));
  CHECK_THAT(both.error(), Catch::Contains("ml/early"));
  // Once one is served (checkpoint) or marked allocated, the other is the only candidate.
  cp.add({"uid-early", "ml", "early", "c", {"GPU-1"}});
  CHECK(match(pods, 1, cp)->pod_name == "late");
  agent::AllocationCheckpoint empty("/nonexistent/cp2.json");
  pods[0]["metadata"]["annotations"]["gapless.io/allocated"] = "{}";
  CHECK(match(pods, 1, empty)->pod_name == "early");
}

TEST_CASE("several pods without a record get the kubelet's choice", "[podmatch]") {
  agent::AllocationCheckpoint cp("/nonexistent/cp.json");
  const std::vector<json> pods = {pod("a", json::array({container("c", 1)})),
                                  pod("b", json::array({container("c", 1)}))};
  CHECK_FALSE(match(pods, 1, cp));
  // One of them with a record: ambiguous, refused.
  const std::vector<json> mixed = {pods[0],
                                   pod("r", json::array({container("c", 1)}), record("r", {4}))};
  auto m = agent::match_admission({{"items", json(mixed)}}, "n1", "nvidia.com/gpu",
                                  agent::GrantKind::kWhole, 1, cp);
  REQUIRE_FALSE(m.ok());
  CHECK_THAT(m.error(), Catch::Contains("ml/a (no record)"));
}

TEST_CASE("running, deleted and other nodes' pods are never matched", "[podmatch]") {
  agent::AllocationCheckpoint cp("/nonexistent/cp.json");
  json running = pod("running", json::array({container("c", 1)}), record("running", {0}));
  running["status"]["phase"] = "Running";
  json deleting = pod("deleting", json::array({container("c", 1)}), record("deleting", {1}));
  deleting["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:05Z";
  json elsewhere = pod("elsewhere", json::array({container("c", 1)}));
  elsewhere["spec"]["nodeName"] = "n2";
  CHECK_FALSE(match({running, deleting, elsewhere}, 1, cp));
}

TEST_CASE("init containers take the record's first GPUs, the others consecutive ones",
          "[podmatch]") {
  agent::AllocationCheckpoint cp("/nonexistent/cp.json");
  const json p =
      pod("p", json::array({container("a", 1), container("b", 2)}), record("p", {5, 6, 7}),
          "2026-01-01T00:00:00Z", json::array({container("init", 3)}));
  auto init = match({p}, 3, cp);
  REQUIRE(init);
  CHECK(init->container == "init");
  CHECK(gpus(*init) == std::vector<int>{5, 6, 7});
  CHECK_FALSE(init->last);
  cp.add({"uid-p", "ml", "p", "init", {}});
  CHECK_FALSE(match({p}, 2, cp));  // container "a" comes first and asks for 1
  auto a = match({p}, 1, cp);
  REQUIRE(a);
  CHECK(gpus(*a) == std::vector<int>{5});
  cp.add({"uid-p", "ml", "p", "a", {}});
  auto b = match({p}, 2, cp);
  REQUIRE(b);
  CHECK(gpus(*b) == std::vector<int>{6, 7});
  CHECK(b->last);
  // The init container held the record's first three GPUs: the kubelet may pass them again.
  REQUIRE(b->reusable.size() == 3);
  CHECK(b->reusable[0].index == 5);
}

TEST_CASE("a record the plugin cannot trust fails the match", "[podmatch]") {
  agent::AllocationCheckpoint cp("/nonexistent/cp.json");
  auto error = [&](const json& p, int count) {
    auto m = agent::match_admission({{"items", json::array({p})}}, "n1", "nvidia.com/gpu",
                                    agent::GrantKind::kWhole, count, cp);
    REQUIRE_FALSE(m.ok());
    return m.error();
  };
  CHECK_THAT(error(pod("g", json::array({container("c", 1)}), "{garbage"), 1),
             Catch::Contains("bad allocation record"));
  CHECK_THAT(error(pod("o", json::array({container("c", 1)}), record("o", {0}, "n2")), 1),
             Catch::Contains("for node n2"));
  CHECK_THAT(error(pod("s", json::array({container("c", 2)}), record("s", {0})), 2),
             Catch::Contains("names 1"));
  // Shares are not whole GPUs: the shared plugin finds none in a whole-GPU record.
  auto m = agent::match_admission(
      {{"items", {pod("w", json::array({container("c", 1)}), record("w", {0}))}}}, "n1",
      "nvidia.com/gpu", agent::GrantKind::kShared, 1, cp);
  CHECK_FALSE(m.ok());
  CHECK_FALSE(agent::match_admission(json::object(), "n1", "nvidia.com/gpu",
                                     agent::GrantKind::kWhole, 1, cp)
                  .ok());
}

TEST_CASE("the checkpoint survives a save and load; a broken file is an error", "[podmatch]") {
  test::TempDir dir;
  agent::AllocationCheckpoint cp(dir.file("cp.json"));
  REQUIRE(cp.load().ok());  // no file yet: empty
  cp.add({"u1", "ml", "a", "c", {"GPU-1", "GPU-2"}});
  cp.add({"u2", "ml", "b", "c", {"GPU-3"}});
  REQUIRE(cp.save().ok());
  agent::AllocationCheckpoint again(dir.file("cp.json"));
  REQUIRE(again.load().ok());
  CHECK(again.entries() == cp.entries());
  CHECK(again.retain({"u2"}));
  CHECK_FALSE(again.contains("u1", "c"));
  CHECK(again.contains("u2", "c"));
  dir.write("bad.json", R"({"v":1,"containers":[{"uid":3}]})");
  agent::AllocationCheckpoint bad(dir.file("bad.json"));
  CHECK_FALSE(bad.load().ok());
  CHECK(bad.entries().empty());
}

namespace {

std::string mig_record(const std::string& name, std::vector<model::MigGrant> mig) {
  model::Allocation a;
  a.pod_uid = "uid-" + name;
  a.pod_ns = "ml";
  a.pod_name = name;
  a.node = "n1";
  a.mig = std::move(mig);
  return k8s::encode_allocation_record(a);
}

json mig_container(const std::string& profile, int count) {
  return {{"name", "c"},
          {"resources", {{"limits", {{"nvidia.com/mig-" + profile, std::to_string(count)}}}}}};
}

}  // namespace

TEST_CASE("a MIG container gets its record's instances of its own profile", "[podmatch][mig]") {
  CHECK(agent::mig_profile_of("nvidia.com/mig-3g.40gb") == "3g.40gb");
  CHECK(agent::mig_profile_of("nvidia.com/gpu").empty());
  test::TempDir dir;
  agent::AllocationCheckpoint cp(dir.file("cp.json"));
  const json p = pod("m", json::array({mig_container("1g.10gb", 2)}),
                     mig_record("m", {{7, "3g.40gb", 4}, {7, "1g.10gb", 1}, {6, "1g.10gb", 6}}));
  auto m = agent::match_admission({{"items", json::array({p})}}, "n1", "nvidia.com/mig-1g.10gb",
                                  agent::GrantKind::kMig, 2, cp);
  REQUIRE(m.ok());
  REQUIRE(m->has_value());
  CHECK((*m)->has_record);
  CHECK((*m)->mig == std::vector<model::MigGrant>{{7, "1g.10gb", 1}, {6, "1g.10gb", 6}});

  SECTION(
      "an entry without a placement (counted from NVIDIA's inventory) is the kubelet's choice") {
    const json q = pod("q", json::array({mig_container("1g.10gb", 1)}),
                       mig_record("q", {{-1, "1g.10gb", -1}}));
    auto n = agent::match_admission({{"items", json::array({q})}}, "n1", "nvidia.com/mig-1g.10gb",
                                    agent::GrantKind::kMig, 1, cp);
    REQUIRE(n.ok());
    REQUIRE(n->has_value());
    CHECK_FALSE((*n)->has_record);
  }
}

TEST_CASE("MIG instances stay in use until their pod finishes", "[podmatch][mig]") {
  auto with_phase = [](json p, const std::string& phase) {
    p["status"]["phase"] = phase;
    return p;
  };
  json deleting = pod("d", json::array(), mig_record("d", {{1, "1g.10gb", 2}}));
  deleting["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:05Z";
  json elsewhere = pod("e", json::array(), mig_record("e", {{1, "1g.10gb", 3}}));
  elsewhere["spec"]["nodeName"] = "n2";
  const std::vector<json> pods = {
      with_phase(pod("r", json::array(), mig_record("r", {{0, "1g.10gb", 0}})), "Running"),
      pod("p", json::array(), mig_record("p", {{0, "1g.10gb", 1}})),  // Pending
      deleting,
      elsewhere,
      with_phase(pod("s", json::array(), mig_record("s", {{1, "1g.10gb", 4}})), "Succeeded"),
      with_phase(pod("f", json::array(), mig_record("f", {{1, "1g.10gb", 5}})), "Failed"),
      pod("w", json::array(), record("w", {3})),  // whole GPUs: no MIG
  };
  const auto used = agent::mig_in_use({{"items", json(pods)}}, "n1");
  CHECK(used ==
        std::vector<model::MigGrant>{{0, "1g.10gb", 0}, {0, "1g.10gb", 1}, {1, "1g.10gb", 2}});
}
