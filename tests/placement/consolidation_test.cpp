// Consolidation's planner (placement/consolidation.h): the fewest movable pods, each placed again
// elsewhere, that make one node fit a waiting pod; and its ledger's rate limits.
#include <catch2/catch.hpp>

#include "gapless/placement/consolidation.h"
#include "gapless/placement/consolidation_stage.h"
#include "gapless/placement/engine.h"
#include "test_nodes.h"

namespace {

using namespace gapless;
using namespace gapless::placement;
using namespace gapless::testnodes;

// Puts a pod on `node` where the engine would (so grants are real), with its movability.
void put(model::Cluster& c, const std::string& uid, const std::string& node,
         const model::GpuRequest& req, model::Movability movable = model::Movability::kOptedIn) {
  model::PodInfo p = pod(uid);
  p.movable = movable;
  auto a = place(c, req, bundle(), p, node);
  REQUIRE(a);
  CHECK(a->movable == movable);
  REQUIRE(c.commit(*a));
}

ConsolidationQuery rules_on(int max_moves = 3) {
  ConsolidationQuery q;
  q.rules.enabled = true;
  q.rules.max_moves = max_moves;
  q.check_host = false;
  return q;
}

std::vector<std::string> moved(const ConsolidationSearch& s) {
  std::vector<std::string> out;
  if (s.plan) {
    for (const PlannedMove& m : s.plan->moves) out.push_back(m.pod_uid);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// a: two movable 2-GPU pods beside a fixed 4-GPU one; b: four movable 1-GPU pods beside a fixed
// 4-GPU one; c and d: 3 GPUs free each. A 4-GPU pod fits none.
model::Cluster two_ways() {
  model::Cluster c;
  for (const char* n : {"a", "b", "c", "d"}) c.upsert_node(h100_nvswitch(n));
  const auto fixed = model::Movability::kNever;
  put(c, "a-fixed", "a", whole(4), fixed);
  put(c, "a1", "a", whole(2));
  put(c, "a2", "a", whole(2));
  put(c, "b-fixed", "b", whole(4), fixed);
  for (const char* u : {"b1", "b2", "b3", "b4"}) put(c, u, "b", whole(1));
  put(c, "c-fixed", "c", whole(5), fixed);
  put(c, "d-fixed", "d", whole(5), fixed);
  return c;
}

}  // namespace

TEST_CASE("consolidation: the fewest evictions, each placed again elsewhere", "[consolidation]") {
  const model::Cluster c = two_ways();
  const ConsolidationSearch s = plan_consolidation(c, whole(4), 0, bundle(), rules_on());
  REQUIRE(s.plan);
  CHECK(s.plan->node == "a");
  CHECK(moved(s) == std::vector<std::string>{"a1", "a2"});
  CHECK(s.nodes_considered == 2);
  CHECK(s.plan->gpu_milli == 4000);
  for (const PlannedMove& m : s.plan->moves) {
    CHECK(m.from == "a");
    CHECK((m.to == "c" || m.to == "d"));
  }
  CHECK(s.plan->moves[0].to != s.plan->moves[1].to);  // 3 free each: one 2-GPU pod per node

  SECTION("no plan within maxMovesPerPlan") {
    CHECK_FALSE(plan_consolidation(c, whole(4), 0, bundle(), rules_on(1)).plan);
  }
  SECTION("the same answer whatever the order the model was built in") {
    model::Cluster reversed;
    for (const char* n : {"d", "c", "b", "a"}) reversed.upsert_node(*c.find_node(n));
    std::vector<const model::Allocation*> all = c.allocations();
    std::reverse(all.begin(), all.end());
    for (const model::Allocation* a : all) REQUIRE(reversed.restore(*a));
    const ConsolidationSearch again =
        plan_consolidation(reversed, whole(4), 0, bundle(), rules_on());
    REQUIRE(again.plan);
    CHECK(again.plan->node == s.plan->node);
    for (std::size_t i = 0; i < s.plan->moves.size(); ++i) {
      CHECK(again.plan->moves[i].pod_uid == s.plan->moves[i].pod_uid);
      CHECK(again.plan->moves[i].to == s.plan->moves[i].to);
    }
  }
}

TEST_CASE("consolidation: a pod that cannot be placed again is never evicted", "[consolidation]") {
  model::Cluster c = two_ways();
  // a's two pods become one 4-GPU pod: evicting it alone would be the fewest, but no node has
  // 4 GPUs free for it.
  c.release("a1");
  c.release("a2");
  put(c, "a-big", "a", whole(4));
  const ConsolidationSearch s = plan_consolidation(c, whole(4), 0, bundle(), rules_on(4));
  REQUIRE(s.plan);
  CHECK(s.plan->node == "b");
  CHECK(moved(s) == std::vector<std::string>{"b1", "b2", "b3", "b4"});
  CHECK(s.sets_unplaceable >= 1);

  c.release("b1");
  put(c, "b1", "b", whole(1), model::Movability::kNever);
  const ConsolidationSearch none = plan_consolidation(c, whole(4), 0, bundle(), rules_on(4));
  CHECK_FALSE(none.plan);
  CHECK(none.sets_unplaceable >= 1);
}

TEST_CASE("consolidation: only movable pods, of no higher priority", "[consolidation]") {
  model::Cluster c;
  for (const char* n : {"a", "c"}) c.upsert_node(h100_nvswitch(n));
  put(c, "a-fixed", "a", whole(5), model::Movability::kNever);
  put(c, "a1", "a", whole(2), model::Movability::kByPolicy);
  put(c, "c-fixed", "c", whole(6), model::Movability::kNever);
  ConsolidationQuery q = rules_on();

  SECTION("by policy: movable only under the priority threshold") {
    CHECK_FALSE(plan_consolidation(c, whole(3), 0, bundle(), q).plan);
    q.rules.movable_below_priority = 0;  // a1's priority is 0: not below
    CHECK_FALSE(plan_consolidation(c, whole(3), 0, bundle(), q).plan);
    q.rules.movable_below_priority = 1;
    const ConsolidationSearch s = plan_consolidation(c, whole(3), 0, bundle(), q);
    REQUIRE(s.plan);
    CHECK(moved(s) == std::vector<std::string>{"a1"});
    CHECK(s.plan->moves[0].to == "c");
  }
  SECTION("never for a pod of lower priority than the one moved") {
    q.rules.movable_below_priority = 100;
    CHECK(plan_consolidation(c, whole(3), 0, bundle(), q).plan);
    CHECK_FALSE(plan_consolidation(c, whole(3), -1, bundle(), q).plan);
  }
  SECTION("nothing to plan when a node fits now, or for a pod asking no GPU") {
    CHECK(plan_consolidation(c, whole(2), 0, bundle(), q).fits_now);
    CHECK_FALSE(plan_consolidation(c, whole(2), 0, bundle(), q).plan);
    CHECK_FALSE(plan_consolidation(c, model::GpuRequest{}, 0, bundle(), q).plan);
  }
}

TEST_CASE("consolidation: an evicted pod keeps its NVLink set", "[consolidation]") {
  model::Cluster c;
  c.upsert_node(h100_nvswitch("nv"));
  c.upsert_node(pcie_node("pcie", 8, kH100, 81559));
  put(c, "nv-fixed", "nv", whole(4), model::Movability::kNever);
  put(c, "pair", "nv", whole(2));  // two NVLinked GPUs
  put(c, "pcie-fixed", "pcie", whole(2), model::Movability::kNever);
  const model::GpuRequest four = whole(4, model::TopologyWish::kNvlinkRequired);
  // pcie has 6 GPUs free but no NVLink: the pair cannot go there as it is.
  const ConsolidationSearch held = plan_consolidation(c, four, 0, bundle(), rules_on());
  CHECK_FALSE(held.plan);
  CHECK(held.sets_unplaceable == 1);
  auto req = held_request(*c.find_node("nv"), *c.allocation("pair"));
  REQUIRE(req);
  CHECK(req->topology == model::TopologyWish::kNvlinkRequired);
  CHECK(req->models == std::vector<std::string>{kH100});

  // The driver knows the pod asked no NVLink: then it may go.
  ConsolidationQuery q = rules_on();
  q.request_of = [](const model::Allocation&) { return std::optional(whole(2)); };
  const ConsolidationSearch s = plan_consolidation(c, four, 0, bundle(), q);
  REQUIRE(s.plan);
  CHECK(s.plan->node == "nv");
  CHECK(s.plan->moves.at(0).to == "pcie");
}

TEST_CASE("consolidation: an evicted MIG instance goes where its profile fits", "[consolidation]") {
  model::Cluster c;
  c.upsert_node(a100_80_mig("m1", 1));
  c.upsert_node(a100_80_mig("m2", 1));
  put(c, "small", "m1", mig("3g.40gb"));
  put(c, "m2-fixed", "m2", mig("4g.40gb"), model::Movability::kNever);
  const ConsolidationSearch s = plan_consolidation(c, mig("7g.80gb"), 0, bundle(), rules_on());
  REQUIRE(s.plan);
  CHECK(s.plan->node == "m1");
  CHECK(s.plan->moves.at(0).to == "m2");
  CHECK(s.plan->gpu_milli == 3 * 1000 / 7);  // 3 of 7 compute slices

  // With m2's room taken as well, the instance has nowhere to go.
  put(c, "m2-more", "m2", mig("3g.40gb"), model::Movability::kNever);
  CHECK_FALSE(plan_consolidation(c, mig("7g.80gb"), 0, bundle(), rules_on()).plan);
}

TEST_CASE("consolidation: equal evictions, the least GPU-time lost", "[consolidation]") {
  model::Cluster c;
  for (const char* n : {"a", "b", "c"}) c.upsert_node(h100_nvswitch(n));
  put(c, "a-fixed", "a", whole(5), model::Movability::kNever);
  put(c, "old", "a", whole(2));
  put(c, "b-fixed", "b", whole(5), model::Movability::kNever);
  put(c, "young", "b", whole(2));
  put(c, "c-fixed", "c", whole(6), model::Movability::kNever);
  ConsolidationQuery q = rules_on();
  q.now_s = 1000;
  q.started_at = [](const model::Allocation& a) { return a.pod_uid == "old" ? 0.0 : 900.0; };
  const ConsolidationSearch s = plan_consolidation(c, whole(3), 0, bundle(), q);
  REQUIRE(s.plan);
  CHECK(moved(s) == std::vector<std::string>{"young"});
  CHECK(s.plan->gpu_seconds == Approx(200.0));  // 2 GPUs x 100 s
  CHECK(s.plan->moves.at(0).to == "c");
}

// a: a movable 3-GPU pod beside a fixed 3-GPU one; b: a movable 1-GPU pod beside a fixed 5-GPU
// one; c: 1 GPU free. A 5-GPU pod fits a once `x` goes, but `x` (3 GPUs) fits no node as it is:
// only b has room for it, once `y` moves to c. b itself can never take the 5-GPU pod.
model::Cluster chain_only() {
  model::Cluster c;
  for (const char* n : {"a", "b", "c"}) c.upsert_node(h100_nvswitch(n));
  const auto fixed = model::Movability::kNever;
  put(c, "a-fixed", "a", whole(3), fixed);
  put(c, "x", "a", whole(3));
  put(c, "b-fixed", "b", whole(5), fixed);
  put(c, "y", "b", whole(1));
  put(c, "c-fixed", "c", whole(7), fixed);
  return c;
}

TEST_CASE("consolidation: a chain when no one-level plan exists", "[consolidation]") {
  const model::Cluster c = chain_only();
  const ConsolidationSearch s = plan_consolidation(c, whole(5), 0, bundle(), rules_on(2));
  REQUIRE(s.plan);
  CHECK(s.chained);
  CHECK(s.plan->node == "a");
  REQUIRE(s.plan->moves.size() == 2);
  // The chain's move first (it makes the room), then the pod it made room for.
  CHECK(s.plan->moves[0].pod_uid == "y");
  CHECK(s.plan->moves[0].from == "b");
  CHECK(s.plan->moves[0].to == "c");
  CHECK(s.plan->moves[1].pod_uid == "x");
  CHECK(s.plan->moves[1].from == "a");
  CHECK(s.plan->moves[1].to == "b");
  CHECK(s.plan->gpu_milli == 4000);
  CHECK(s.sets_unplaceable == 1);  // x alone, placed nowhere without the chain
  CHECK(describe(s, rules_on(2).rules).find("1 of them from another node") != std::string::npos);

  SECTION("the chain's evictions count against maxMovesPerPlan") {
    const ConsolidationSearch one = plan_consolidation(c, whole(5), 0, bundle(), rules_on(1));
    CHECK_FALSE(one.plan);
    CHECK_FALSE(one.chained);
  }
  SECTION("a chain only through movable pods") {
    model::Cluster fixed_y = c;
    fixed_y.release("y");
    put(fixed_y, "y", "b", whole(1), model::Movability::kNever);
    CHECK_FALSE(plan_consolidation(fixed_y, whole(5), 0, bundle(), rules_on(3)).plan);
  }
  SECTION("the rate limits count the chain's evictions too") {
    ConsolidationQuery q = rules_on(2);
    q.within_limits = [](const std::vector<const model::Allocation*>& pods) {
      return pods.size() < 2;
    };
    const ConsolidationSearch limited = plan_consolidation(c, whole(5), 0, bundle(), q);
    CHECK_FALSE(limited.plan);
    CHECK(limited.sets_rate_limited == 1);
  }
  SECTION("a one-level plan before any chain") {
    model::Cluster direct = c;
    direct.upsert_node(h100_nvswitch("d"));
    put(direct, "d-fixed", "d", whole(3), model::Movability::kNever);
    put(direct, "d1", "d", whole(2));
    put(direct, "d2", "d", whole(1));
    direct.upsert_node(h100_nvswitch("e"));  // room for d1 (d2 goes to c), not for x
    put(direct, "e-fixed", "e", whole(6), model::Movability::kNever);
    const ConsolidationSearch s2 = plan_consolidation(direct, whole(5), 0, bundle(), rules_on(2));
    REQUIRE(s2.plan);
    CHECK_FALSE(s2.chained);
    CHECK(s2.plan->node == "d");
    CHECK(moved(s2) == std::vector<std::string>{"d1", "d2"});
  }
}

TEST_CASE("consolidation: a chain plan whatever the order the model was built in",
          "[consolidation]") {
  const model::Cluster c = chain_only();
  model::Cluster reversed;
  for (const char* n : {"c", "b", "a"}) reversed.upsert_node(*c.find_node(n));
  std::vector<const model::Allocation*> all = c.allocations();
  std::reverse(all.begin(), all.end());
  for (const model::Allocation* a : all) REQUIRE(reversed.restore(*a));
  const ConsolidationSearch s = plan_consolidation(c, whole(5), 0, bundle(), rules_on(3));
  const ConsolidationSearch again =
      plan_consolidation(reversed, whole(5), 0, bundle(), rules_on(3));
  REQUIRE(s.plan);
  REQUIRE(again.plan);
  REQUIRE(again.plan->moves.size() == s.plan->moves.size());
  for (std::size_t i = 0; i < s.plan->moves.size(); ++i) {
    CHECK(again.plan->moves[i].pod_uid == s.plan->moves[i].pod_uid);
    CHECK(again.plan->moves[i].from == s.plan->moves[i].from);
    CHECK(again.plan->moves[i].to == s.plan->moves[i].to);
  }
}

TEST_CASE("consolidation stage: off by default, and the rate limits hold", "[consolidation]") {
  const model::Cluster c = two_ways();
  const std::vector<Quota> no_quotas;
  const model::PodInfo p = pod("waiting");
  const model::GpuRequest four = whole(4);
  const StageCall call{c, no_quotas, 32, p, four, false};
  ConsolidationStage stage;
  ConsolidationQuery q = rules_on(4);
  ConsolidationSearch out;

  q.rules.enabled = false;
  REQUIRE(stage.consolidate(call, bundle(), q, &out));
  CHECK_FALSE(out.plan);
  q.rules.enabled = true;
  REQUIRE(stage.consolidate(call, bundle(), q, &out));
  REQUIRE(out.plan);
  CHECK(out.plan->node == "a");

  SECTION("per minute: no plan over the limit") {
    q.rules.per_minute = 1;
    REQUIRE(stage.consolidate(call, bundle(), q, &out));
    CHECK_FALSE(out.plan);
    CHECK(out.sets_rate_limited > 0);
  }
  SECTION("the moves made count for a minute, per namespace too") {
    q.rules.per_minute = 3;
    q.rules.pod_cooldown_s = 0;
    stage.moves_made(*out.plan, 0, q.rules);
    q.now_s = 59;
    REQUIRE(stage.consolidate(call, bundle(), q, &out));
    CHECK_FALSE(out.plan);  // 2 made + 2 more > 3
    q.now_s = 60;
    REQUIRE(stage.consolidate(call, bundle(), q, &out));
    CHECK(out.plan);
    q.rules.per_minute = 0;
    q.rules.per_namespace_per_minute = 3;
    q.now_s = 30;
    REQUIRE(stage.consolidate(call, bundle(), q, &out));
    CHECK_FALSE(out.plan);
  }
  SECTION("a pod moved is not moved again within the cooldown") {
    q.rules.pod_cooldown_s = 600;
    stage.moves_made(*out.plan, 0, q.rules);  // a1 and a2
    q.now_s = 300;
    REQUIRE(stage.consolidate(call, bundle(), q, &out));
    REQUIRE(out.plan);
    CHECK(out.plan->node == "b");  // a's pods are cooling down: b's four instead
    q.now_s = 600;
    REQUIRE(stage.consolidate(call, bundle(), q, &out));
    REQUIRE(out.plan);
    CHECK(out.plan->node == "a");
  }
}
