// Which GPUs shared (gapless.io/gpu-memory / -compute) and gpushare (aliyun.com/gpu-mem) pods
// get: bundle packs onto the fullest GPU that fits, spread onto the emptiest.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "gapless/placement/choice.h"
#include "gapless/placement/engine.h"
#include "test_nodes.h"

namespace {

using namespace gapless::testnodes;
using gapless::model::Allocation;
using gapless::model::Cluster;
using gapless::model::GpuRequest;
using gapless::model::Node;
using gapless::placement::choose;
using gapless::placement::place;

std::vector<int> indices(const gapless::placement::Choice& c) {
  std::vector<int> out;
  for (const auto& g : c.gpus) out.push_back(g.index);
  return out;
}

void commit_grants(Cluster& c, const std::string& uid, const std::string& node,
                   std::vector<gapless::model::GpuGrant> grants) {
  Allocation a = alloc(uid, node);
  a.gpus = std::move(grants);
  REQUIRE(c.commit(a));
}

int place_one(Cluster& c, const GpuRequest& req, const gapless::placement::Profile& profile,
              const std::string& uid, const std::string& node) {
  auto a = place(c, req, profile, pod(uid), node);
  REQUIRE(a.ok());
  REQUIRE(c.commit(*a));
  REQUIRE(a->gpus.size() == 1);
  return a->gpus[0].index;
}

}  // namespace

TEST_CASE("a shared grant carries the share and the GPU's UUID", "[placement][shared]") {
  const Node n = t4_node();
  const auto pick = choose(n, shared(4096, 250, 2), bundle());
  REQUIRE(pick);
  REQUIRE(pick->gpus.size() == 2);
  CHECK(pick->gpus[0].index != pick->gpus[1].index);
  for (const auto& g : pick->gpus) {
    CHECK(g.memory_mib == 4096);
    CHECK(g.compute_milli == 250);
    CHECK(g.gpushare_units == 0);
    CHECK_FALSE(g.whole());
    CHECK(g.uuid == n.gpus[g.index].uuid);
  }
  CHECK(pick->mig.empty());
}

TEST_CASE("bundle packs shares onto the fullest GPU, spread onto the emptiest",
          "[placement][shared]") {
  Cluster c;
  c.upsert_node(t4_node("t4"));
  commit_grants(c, "a", "t4", {share_grant(2, 7680, 100)});  // GPU 2 half full (vRAM)
  commit_grants(c, "b", "t4", {share_grant(1, 1024, 200)});  // GPU 1 a little
  const Node& n = *c.find_node("t4");
  CHECK(indices(*choose(n, shared(2048, 100), bundle())) == std::vector<int>{2});
  CHECK(indices(*choose(n, shared(2048, 100), spread())) == std::vector<int>{0});
  CHECK(indices(*choose(n, shared(2048, 100, 2), bundle())) == std::vector<int>{1, 2});
  CHECK(indices(*choose(n, shared(2048, 100, 2), spread())) == std::vector<int>{0, 3});
  // The fullest GPU that still fits: GPU 2 lacks the vRAM for 8000 MiB.
  CHECK(indices(*choose(n, shared(8000, 0), bundle())) == std::vector<int>{1});
}

TEST_CASE("bundle fills one GPU with a stream of shares before opening the next",
          "[placement][shared]") {
  Cluster c;
  c.upsert_node(t4_node("t4"));
  std::vector<int> got;
  for (int i = 0; i < 8; ++i)
    got.push_back(place_one(c, shared(3840, 250), bundle(), "p" + std::to_string(i), "t4"));
  CHECK(got == std::vector<int>{0, 0, 0, 0, 1, 1, 1, 1});
  const auto& u = c.find_node("t4")->gpus[0].used;
  CHECK(u.shared_pods == 4);
  CHECK(u.memory_used_mib == 15360);
  CHECK(u.compute_used_milli == 1000);
  CHECK(c.find_node("t4")->gpus[2].used.idle());
}

TEST_CASE("spread deals a stream of shares round the GPUs", "[placement][shared]") {
  Cluster c;
  c.upsert_node(t4_node("t4"));
  std::vector<int> got;
  for (int i = 0; i < 8; ++i)
    got.push_back(place_one(c, shared(1024, 100), spread(), "p" + std::to_string(i), "t4"));
  CHECK(got == std::vector<int>{0, 1, 2, 3, 0, 1, 2, 3});
}

TEST_CASE("shares avoid held, MIG, gpushare and unhealthy GPUs", "[placement][shared]") {
  Node n = with_unhealthy(t4_node("t4", 6), 4);
  n.gpus[0].used.whole = true;
  n.gpus[1].used.compute_used_milli = 950;
  n.gpus[1].used.shared_pods = 1;
  for (const auto& profile : {bundle(), spread()}) {
    const auto pick = choose(n, shared(1024, 100, 3), profile);
    REQUIRE(pick);
    CHECK(indices(*pick) == std::vector<int>{2, 3, 5});
    CHECK_FALSE(choose(n, shared(1024, 100, 4), profile));
    CHECK(choose(n, shared(1024, 50, 4), profile));  // GPU 1 has 50 milli left
  }
  CHECK_FALSE(choose(a100_80_mig(), shared(1024, 100), bundle()));
  CHECK_FALSE(choose(gpushare_node(), shared(0, 100), bundle()));
}

TEST_CASE("memory-only and compute-only shares", "[placement][shared]") {
  Cluster c;
  c.upsert_node(t4_node("t4", 1));
  // Compute-only shares stack to 1000 milli even though vRAM is unbounded.
  for (int i = 0; i < 4; ++i) place_one(c, shared(0, 250), bundle(), "c" + std::to_string(i), "t4");
  CHECK_FALSE(place(c, shared(0, 1), bundle(), pod("c4"), "t4").ok());
  // Memory-only shares still fit: compute is not bounded for them.
  place_one(c, shared(15360, 0), bundle(), "m", "t4");
  CHECK_FALSE(place(c, shared(1, 0), bundle(), pod("m2"), "t4").ok());
}

TEST_CASE("gpushare: bundle picks the fuller GPU, spread the emptier", "[placement][gpushare]") {
  Cluster c;
  c.upsert_node(gpushare_node("gs", 3, 16));
  commit_grants(c, "a", "gs", {gpushare_grant(1, 10)});
  commit_grants(c, "b", "gs", {gpushare_grant(2, 4)});
  const Node& n = *c.find_node("gs");
  const auto b = choose(n, gpushare(6), bundle());
  REQUIRE(b);
  CHECK(indices(*b) == std::vector<int>{1});
  CHECK(b->gpus[0].gpushare_units == 6);
  CHECK(b->gpus[0].memory_mib == 0);
  CHECK(b->gpus[0].compute_milli == 0);
  CHECK(indices(*choose(n, gpushare(6), spread())) == std::vector<int>{0});
  CHECK(indices(*choose(n, gpushare(7), bundle())) == std::vector<int>{2});  // 1 too full
  CHECK(indices(*choose(n, gpushare(16), bundle())) == std::vector<int>{0});
  CHECK_FALSE(choose(n, gpushare(17), bundle()));
}

TEST_CASE("gpushare stream under bundle never over-commits a GPU", "[placement][gpushare]") {
  Cluster c;
  c.upsert_node(gpushare_node("gs", 2, 16));
  int placed = 0;
  for (int i = 0; i < 20; ++i) {
    auto a = place(c, gpushare(3), bundle(), pod("p" + std::to_string(i)), "gs");
    if (!a.ok()) break;
    REQUIRE(c.commit(*a));
    ++placed;
  }
  CHECK(placed == 10);  // 5 per GPU
  for (const auto& g : c.find_node("gs")->gpus) CHECK(g.used.gpushare_used == 15);
}

TEST_CASE("node level: bundle prefers the node whose GPUs are fuller", "[placement][shared]") {
  Cluster c;
  c.upsert_node(t4_node("light"));
  c.upsert_node(t4_node("heavy"));
  commit_grants(c, "l", "light", {share_grant(0, 1024, 100)});
  commit_grants(c, "h", "heavy", {share_grant(0, 8192, 600)});
  const std::vector<std::string> names = {"light", "heavy"};
  const auto b = gapless::placement::prioritize(c, shared(2048, 200), bundle(), names);
  const auto s = gapless::placement::prioritize(c, shared(2048, 200), spread(), names);
  CHECK(b[1] > b[0]);
  CHECK(s[0] > s[1]);
}

TEST_CASE("bundle fills shares in both dimensions: no vRAM left on a GPU whose compute remains",
          "[placement][shared]") {
  // GPU 0 has most of its vRAM taken but little compute; GPU 1 is evenly used. A share asking
  // little vRAM and much compute fits both. On GPU 0 it would leave 10 % of vRAM beside 50 % of
  // compute, which no later share can use together; on GPU 1 the two dimensions stay in step.
  Cluster c;
  c.upsert_node(pcie_node("n", 2, kH100, 80000));
  commit_grants(c, "a", "n", {share_grant(0, 56000, 100)});
  commit_grants(c, "b", "n", {share_grant(1, 32000, 400)});
  const GpuRequest req = shared(16000, 400);
  CHECK(place_one(c, req, bundle(), "p", "n") == 1);
}
