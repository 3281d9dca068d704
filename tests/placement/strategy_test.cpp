// The strategy registry, profile selection, the built-in policy and the demand helpers the
// strategies share.
#include <catch2/catch.hpp>

#include <string>
#include <string_view>
#include <vector>

#include "gapless/placement/choice.h"
#include "gapless/placement/demand.h"
#include "gapless/placement/profile.h"
#include "gapless/placement/strategy.h"
#include "test_nodes.h"

namespace {

using namespace gapless::testnodes;
using gapless::model::Node;
using gapless::model::PodInfo;
using gapless::placement::find_strategy;
using gapless::placement::Policy;
using gapless::placement::Profile;
using gapless::placement::select_profile;

}  // namespace

TEST_CASE("the registry knows every strategy, sorted", "[placement][strategy]") {
  const auto names = gapless::placement::strategy_names();
  CHECK(names == std::vector<std::string_view>{"bestfit", "bundle", "clustering", "dotprod", "fgd",
                                               "gapless", "packing", "random", "spread"});
  for (auto name : names) {
    const auto* s = find_strategy(name);
    REQUIRE(s != nullptr);
    CHECK(s->name() == name);
    CHECK_FALSE(s->description().empty());
  }
  CHECK(find_strategy("Bundle") == nullptr);
  CHECK(find_strategy("") == nullptr);
}

// Except for shares inside a node: bundle's best fit there weighs both dimensions (see
// share_choice_test.cpp), spread keeps to the fuller one.
TEST_CASE("strategy scores stay in [0, 1] and bundle mirrors spread", "[placement][strategy]") {
  const auto* b = find_strategy("bundle");
  const auto* s = find_strategy("spread");
  Node n = dgx1_v100();
  n.gpus[0].used.whole = true;
  n.gpus[1].used.shared_pods = 1;
  n.gpus[1].used.memory_used_mib = 8000;
  n.gpus[1].used.compute_used_milli = 300;
  for (const auto& req : {whole(1), whole(3), shared(4096, 200), shared(0, 500, 2)}) {
    const double nb = b->score_node(n, req), ns = s->score_node(n, req);
    CHECK(nb >= 0.0);
    CHECK(nb <= 1.0);
    CHECK(nb + ns == Approx(1.0));
    for (const auto& g : n.gpus) {
      const double gb = b->score_gpu(n, g, req), gs = s->score_gpu(n, g, req);
      CHECK(gb >= 0.0);
      CHECK(gb <= 1.0);
      if (req.kind != gapless::model::RequestKind::kShared) CHECK(gb + gs == Approx(1.0));
    }
  }
}

TEST_CASE("gpu_level_score is the weighted mean of the GPU strategies", "[placement][strategy]") {
  Node n = t4_node();
  n.gpus[1].used.shared_pods = 1;
  n.gpus[1].used.compute_used_milli = 500;
  Profile p;
  p.gpu = {{find_strategy("bundle"), 3.0}, {find_strategy("spread"), 1.0}};
  const auto req = shared(0, 250);
  const double b = find_strategy("bundle")->score_gpu(n, n.gpus[1], req);
  CHECK(b == Approx(0.75));
  CHECK(gapless::placement::gpu_level_score(p, n, n.gpus[1], req) == Approx((3 * b + (1 - b)) / 4));
  CHECK(gapless::placement::gpu_level_score(Profile{}, n, n.gpus[1], req) == 0.0);
}

TEST_CASE("select_profile: annotation, then selectors in order, then default",
          "[placement][profile]") {
  Profile batch = bundle();
  batch.name = "batch";
  batch.select.namespaces = {"ml"};
  Profile serve = spread();
  serve.name = "serve";
  serve.select.pod_labels = {{"tier", "serving"}};
  Profile fallback = bundle();
  fallback.name = "fallback";
  const Policy policy{"test", {batch, serve, fallback}, "fallback", {}, {}};

  PodInfo pod;
  pod.ns = "ml";
  std::string error;
  CHECK(select_profile(policy, pod, &error)->name == "batch");
  pod.labels = {{"tier", "serving"}};
  CHECK(select_profile(policy, pod, &error)->name == "batch");  // first match wins
  pod.ns = "web";
  CHECK(select_profile(policy, pod, &error)->name == "serve");
  pod.labels = {{"tier", "batch"}};
  CHECK(select_profile(policy, pod, &error)->name == "fallback");
  pod.policy = "serve";
  CHECK(select_profile(policy, pod, &error)->name == "serve");
  CHECK(error.empty());
  pod.policy = "nope";
  CHECK(select_profile(policy, pod, &error) == nullptr);
  CHECK_THAT(error, Catch::Contains("nope") && Catch::Contains("test"));
  CHECK(select_profile(policy, pod, nullptr) == nullptr);

  const Policy broken{"b", {batch}, "missing", {}, {}};
  pod.policy.clear();
  error.clear();
  CHECK(select_profile(broken, pod, &error) == nullptr);
  CHECK_FALSE(error.empty());
}

TEST_CASE("an empty selector matches nothing", "[placement][profile]") {
  gapless::placement::Selector empty;
  PodInfo pod;
  CHECK(empty.empty());
  CHECK_FALSE(empty.matches(pod));
  gapless::placement::Selector pc;
  pc.priority_classes = {"high"};
  pod.priority_class = "high";
  CHECK(pc.matches(pod));
  pod.priority_class = "low";
  CHECK_FALSE(pc.matches(pod));
}

TEST_CASE("the built-in policy is gapless at both levels, as policies/default.yaml",
          "[placement][profile]") {
  const Policy p = gapless::placement::builtin_policy();
  CHECK(p.source == "built-in");
  REQUIRE(p.profiles.size() == 1);
  CHECK(p.default_profile == "default");
  const Profile& d = p.profiles[0];
  REQUIRE(d.node.size() == 1);
  REQUIRE(d.gpu.size() == 1);
  CHECK(d.node[0].strategy == find_strategy("gapless"));
  CHECK(d.gpu[0].strategy == find_strategy("gapless"));
  CHECK(d.gpu_weight == 0.0);
  CHECK(d.topology_weight == 1.0);
  std::string error;
  CHECK(select_profile(p, PodInfo{}, &error) == &p.profiles[0]);
}

TEST_CASE("demand helpers", "[placement][demand]") {
  using gapless::placement::can_serve;
  using gapless::placement::can_serve_now;
  using gapless::placement::demand_in_gpus;
  using gapless::placement::gpu_fill;
  using gapless::placement::model_allowed;
  const Node t4 = t4_node();
  auto req = whole(1);
  CHECK(model_allowed(t4.gpus[0], req));
  req.models = {"tesla-t4"};
  CHECK(model_allowed(t4.gpus[0], req));
  req.models = {"Tesla-T"};
  CHECK_FALSE(model_allowed(t4.gpus[0], req));

  CHECK(demand_in_gpus(t4, whole(3)) == 3.0);
  CHECK(demand_in_gpus(t4, shared(7680, 100, 2)) == Approx(1.0));
  CHECK(demand_in_gpus(gpushare_node("g", 2, 16), gpushare(4)) == Approx(0.25));
  CHECK(demand_in_gpus(a100_80_mig(), mig("3g.40gb", 2)) == Approx(6.0 / 7));
  CHECK(demand_in_gpus(t4, gapless::model::GpuRequest{}) == 0.0);

  Node n = a100_80_mig("m", 1);
  CHECK(can_serve(n.gpus[0], mig("1g.10gb")));
  CHECK_FALSE(can_serve(n.gpus[0], mig("1g.5gb")));
  CHECK_FALSE(can_serve(n.gpus[0], whole(1)));
  CHECK_FALSE(can_serve_now(n.gpus[0], mig("1g.10gb")));  // MIG goes through mig_choice
  n.gpus[0].used.mig_compute_used = 3;
  CHECK(gpu_fill(n.gpus[0]) == Approx(3.0 / 7));
  Node w = t4_node();
  w.gpus[0].used.whole = true;
  CHECK(gpu_fill(w.gpus[0]) == 1.0);
  CHECK_FALSE(can_serve_now(w.gpus[0], shared(0, 1)));
  CHECK(gpu_fill(w.gpus[1]) == 0.0);
  CHECK_FALSE(can_serve(with_unhealthy(t4_node(), 0).gpus[0], whole(1)));
}
