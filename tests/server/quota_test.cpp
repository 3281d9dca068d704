// Namespace quotas through the extender's verbs: filter answers an over-quota pod with
// FailedAndUnresolvableNodes naming the quota, bind refuses a pod that raced past filter,
// /metrics shows usage and limits per namespace, and a policy file reload (PolicyWatch) applies
// new limits to the usage already held.
#include <catch2/catch.hpp>
#include <chrono>
#include <string>

#include "gapless/policy/loader.h"
#include "gapless/server/extender.h"
#include "gapless/server/metrics.h"
#include "gapless/server/policy_watch.h"
#include "policy_text.h"
#include "temp_dir.h"
#include "test_server.h"

namespace gapless::test {
namespace {

std::string quota_policy(int whole_gpus) {
  return policy_head() + R"(quotas:
  - name: team-a
    namespaces: [ml]
    limits: {wholeGpus: )" +
         std::to_string(whole_gpus) + "}\n";
}

json ml_pod(const std::string& name, int gpus) {
  return pod(name, "uid-" + name, {{"nvidia.com/gpu", std::to_string(gpus)}}, nullptr, "ml");
}

struct World {
  explicit World(const std::string& policy_path)
      : extender{cluster_of(json::array({gfd_node("n1", 8), gfd_node("n2", 8)})),
                 policy::load_policy_file(policy_path).value(), binder, metrics} {}
  server::Metrics metrics;
  server::InMemoryBinder binder;
  server::Extender extender;

  json filter(const json& pod) {
    return json::parse(extender.filter(extender_args(pod, {"n1", "n2"})));
  }
  std::string bind(const std::string& name, const std::string& node) {
    return json::parse(extender.bind(bind_args(name, "uid-" + name, node, "ml")))["Error"];
  }
  // The sample of `series` (name and labels as /metrics writes them), or -1 when absent.
  double sample(const std::string& series) {
    return metric_sample(extender.metrics_text(), series);
  }
};

const std::string kUsed =
    R"(gapless_quota_used{quota="team-a",namespace="ml",resource="whole_gpus",model=""})";
const std::string kLimit =
    R"(gapless_quota_limit{quota="team-a",namespace="ml",resource="whole_gpus",model=""})";

}  // namespace

TEST_CASE("extender: over-quota pods are unresolvable, binds refused, usage in /metrics",
          "[server][quota]") {
  TempDir dir;
  const std::string path = dir.write("policy.yaml", quota_policy(4));
  World w(path);

  REQUIRE(w.filter(ml_pod("a", 4))["NodeNames"].size() == 2);
  REQUIRE(w.bind("a", "n1").empty());
  CHECK(w.sample(kUsed) == 4);
  CHECK(w.sample(kLimit) == 4);

  const json answer = w.filter(ml_pod("b", 2));
  CHECK(answer["NodeNames"].empty());
  CHECK(answer["FailedNodes"].empty());
  const std::string why =
      "gapless: namespace ml over quota \"team-a\": 4 of 4 whole GPUs in use, pod asks 2";
  CHECK(answer["FailedAndUnresolvableNodes"] == json{{"n1", why}, {"n2", why}});
  CHECK(w.sample(R"(gapless_filter_rejections_total{reason="over_quota"})") == 2);

  // Pods of other namespaces are not limited by it.
  CHECK(w.filter(gpu_pod("c", "uid-c", 2))["NodeNames"].size() == 2);

  // A pod that passed filter before the quota filled up is refused at bind, nothing booked.
  TempDir other;
  World race(other.write("policy.yaml", quota_policy(5)));
  REQUIRE(race.filter(ml_pod("x", 3))["NodeNames"].size() == 2);
  REQUIRE(race.filter(ml_pod("y", 3))["NodeNames"].size() == 2);
  REQUIRE(race.bind("x", "n1").empty());
  CHECK(race.bind("y", "n2") ==
        "cannot bind ml/y to n2: gapless: namespace ml over quota \"team-a\": 3 of 5 whole GPUs "
        "in use, pod asks 3");
  CHECK(race.binder.bindings().size() == 1);
  CHECK(race.sample(kUsed) == 3);
}

TEST_CASE("extender: a reloaded policy file applies new quotas to the usage held",
          "[server][quota][policy-watch]") {
  using namespace std::chrono_literals;
  TempDir dir;
  const std::string path = dir.write("policy.yaml", quota_policy(4));
  World w(path);
  server::PolicyWatch watch(w.extender, w.metrics, path, 1h);  // reloads only when asked
  REQUIRE(w.filter(ml_pod("a", 4))["NodeNames"].size() == 2);
  REQUIRE(w.bind("a", "n1").empty());
  CHECK(w.filter(ml_pod("b", 2))["NodeNames"].empty());

  dir.write("policy.yaml", quota_policy(6));
  REQUIRE(watch.reload_now());
  CHECK(w.sample(kUsed) == 4);
  CHECK(w.sample(kLimit) == 6);
  CHECK(w.filter(ml_pod("b", 2))["NodeNames"].size() == 2);
  CHECK(w.filter(ml_pod("b", 3))["FailedAndUnresolvableNodes"]["n1"] ==
        "gapless: namespace ml over quota \"team-a\": 4 of 6 whole GPUs in use, pod asks 3");

  // An invalid file is refused and the quotas in force stay.
  dir.write("policy.yaml", quota_policy(6) + "    scope: team\n");
  CHECK_FALSE(watch.reload_now());
  CHECK(w.sample(kLimit) == 6);
}

}  // namespace gapless::test
