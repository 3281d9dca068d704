// Bugs the fuzz targets found in the extender verbs (fuzz/, docs/testing-and-bench.md "Fuzzing"),
// one test each. The crashing inputs themselves are replayed by the "fuzz: extender_*" ctests.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <string>

#include "gapless/k8s/binder.h"
#include "gapless/placement/profile.h"
#include "gapless/server/extender.h"
#include "gapless/server/metrics.h"
#include "test_server.h"

namespace gapless::test {
namespace {

struct Fixture {
  server::Metrics metrics;
  server::InMemoryBinder binder;
  server::Extender extender;

  explicit Fixture(model::Cluster cluster)
      : extender(std::move(cluster), placement::builtin_policy(), binder, metrics) {}

  void bind(const json& pod_json, const std::string& node) {
    const json& meta = pod_json.at("metadata");
    REQUIRE(json::parse(extender.filter(extender_args(pod_json, {node}))).at("Error") == "");
    REQUIRE(
        json::parse(extender.bind(bind_args(meta.at("name"), meta.at("uid"), node))).at("Error") ==
        "");
  }
};

json preempt_args(const json& preemptor, const std::string& node, const json& uids) {
  json pods = json::array();
  for (const json& uid : uids) pods.push_back({{"UID", uid}});
  return {{"Pod", preemptor},
          {"NodeNameToMetaVictims", {{node, {{"Pods", pods}, {"NumPDBViolations", 0}}}}}};
}

}  // namespace

// The informer replaced n1's inventory with one that no longer holds the pod's GPUs: the
// allocation is stranded (kept, not applied) and n1 fenced. Preempt unapplied the stranded
// allocation from a copy of the node anyway, writing past the end of its GPU vector
// (fuzz/regressions/extender_preempt/stranded-victim-on-fenced-node.json).
TEST_CASE("preempt skips fenced nodes, whose victims may hold GPUs the node no longer has",
          "[server][preempt][fuzz]") {
  Fixture f(cluster_of(json::array({gfd_node("n1", 4)})));
  f.bind(gpu_pod("old", "uid-old", 4), "n1");
  f.extender.mutate([](model::Cluster& c) {
    model::Node smaller = *c.find_node("n1");
    smaller.gpus.resize(1);
    smaller.gpus[0].uuid = "GPU-replaced";
    smaller.links = model::LinkGraph(1);
    c.upsert_node(std::move(smaller));
    REQUIRE(c.find_node("n1")->fenced());
  });
  const std::string before = f.extender.debug_state();
  const json r = json::parse(
      f.extender.preempt(preempt_args(gpu_pod("new", "uid-new", 1), "n1", {"uid-old"}).dump()));
  CHECK(r == json{{"NodeNameToMetaVictims", json::object()}});
  CHECK(f.extender.debug_state() == before);
}

// A victim listed twice was unapplied twice in the what-if model: its share was freed twice,
// so a node where eviction frees too little looked useful.
TEST_CASE("preempt counts a victim listed twice once", "[server][preempt][fuzz]") {
  Fixture f(cluster_of(json::array({gfd_node("n1", 1)})));  // one GPU, 81559 MiB
  f.bind(pod("a", "uid-a", {{"gapless.io/gpu-memory", "40000"}}), "n1");
  f.bind(pod("b", "uid-b", {{"gapless.io/gpu-memory", "40000"}}), "n1");
  json big = pod("big", "uid-big", {{"gapless.io/gpu-memory", "60000"}});
  big["spec"]["priority"] = 1;  // above a and b: they may be evicted

  // 41559 MiB free without a, not enough: Gapless adds b (not proposed: a possible PDB
  // violation), and lists a once.
  json r = json::parse(f.extender.preempt(preempt_args(big, "n1", {"uid-a", "uid-a"}).dump()));
  CHECK(r.at("NodeNameToMetaVictims") ==
        json{{"n1",
              {{"Pods", json::array({{{"UID", "uid-a"}}, {{"UID", "uid-b"}}})},
               {"NumPDBViolations", 1}}}});

  r = json::parse(f.extender.preempt(preempt_args(big, "n1", {"uid-a", "uid-b", "uid-a"}).dump()));
  CHECK(r.at("NodeNameToMetaVictims") ==
        json{{"n1",
              {{"Pods", json::array({{{"UID", "uid-a"}}, {{"UID", "uid-b"}}})},
               {"NumPDBViolations", 0}}}});
}

// nlohmann parses any depth, but dumping a value recurses once per level: a filter body of
// 100k brackets in a resource quantity overflowed the stack while the error message quoted it.
TEST_CASE("verbs refuse JSON nested deeper than 512 levels", "[server][wire][fuzz]") {
  Fixture f(cluster_of(json::array({gfd_node("n1", 1)})));
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  const std::string args = R"({"Pod":{"spec":{"containers":[{"resources":{"limits":)"
                           R"({"nvidia.com/gpu":)" +
                           deep + R"(}}}]}},"NodeNames":["n1"]})";
  const std::string want = "malformed JSON: nested deeper than 512 levels";
  CHECK(json::parse(f.extender.filter(args)).at("Error") == want);
  CHECK(json::parse(f.extender.prioritize(args)).at("Error") == want);
  CHECK(json::parse(f.extender.preempt(args)).at("Error") == want);
  CHECK(json::parse(f.extender.bind(R"({"PodName":)" + deep + "}")).at("Error") == want);

  // 512 levels are still read (and here rejected for what they are).
  const std::string ok = std::string(505, '[') + std::string(505, ']');
  const json r = json::parse(f.extender.filter(
      R"({"Pod":{"spec":{"containers":[{"resources":{"limits":{"nvidia.com/gpu":)" + ok +
      R"(}}}]}},"NodeNames":["n1"]})"));
  CHECK_THAT(r.at("Error").get<std::string>(), Catch::StartsWith("nvidia.com/gpu: must be"));
}

}  // namespace gapless::test
