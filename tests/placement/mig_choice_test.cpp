// Which MIG instances a pod gets: static instances before carving reconfigurable GPUs, valid and
// non-overlapping placements, starts that keep large profiles placeable, pools as a last resort.
#include <catch2/catch.hpp>

#include <algorithm>
#include <random>
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
using gapless::model::MigGrant;
using gapless::model::Node;
using gapless::placement::choose;
using gapless::placement::place;

// A100-80GB: GPU 0 static (1g.10gb at 0..2, 3g.40gb at 4), GPU 1 reconfigurable.
Node mixed_a100() {
  Node n = a100_80_mig("mixed", 2);
  n.gpus[0].mig.instances =
      layout({{"1g.10gb", 0}, {"1g.10gb", 1}, {"1g.10gb", 2}, {"3g.40gb", 4}});
  normalize(n);
  return n;
}

std::vector<MigGrant> place_commit(Cluster& c, const GpuRequest& req,
                                   const gapless::placement::Profile& profile,
                                   const std::string& uid, const std::string& node) {
  auto a = place(c, req, profile, pod(uid), node);
  REQUIRE(a.ok());
  REQUIRE(c.commit(*a));
  return a->mig;
}

// Checks that the recorded MIG allocations on `node` are valid and disjoint, and that the usage
// counters match them.
void check_mig_consistent(const Cluster& c, const std::string& node) {
  const Node& n = *c.find_node(node);
  std::vector<unsigned> mask(n.gpus.size(), 0);
  std::vector<int> compute(n.gpus.size(), 0), media(n.gpus.size(), 0);
  for (const Allocation* a : c.allocations()) {
    if (a->node != node) continue;
    for (const MigGrant& m : a->mig) {
      REQUIRE(m.gpu >= 0);
      const auto* p = gapless::model::find_mig_profile(n.gpus[m.gpu].mig_family, m.profile);
      REQUIRE(p != nullptr);
      CHECK(std::find(p->starts.begin(), p->starts.end(), m.start) != p->starts.end());
      const unsigned bits = gapless::model::mig_slice_mask(m.start, p->memory_slices);
      CHECK((mask[m.gpu] & bits) == 0u);
      mask[m.gpu] |= bits;
      compute[m.gpu] += p->compute_slices;
      media[m.gpu] += p->media_extensions ? 1 : 0;
    }
  }
  for (const auto& g : n.gpus) {
    INFO("GPU " << g.index);
    CHECK(g.used.mig_slices_used == mask[g.index]);
    CHECK(g.used.mig_compute_used == compute[g.index]);
    CHECK(g.used.mig_media_used == media[g.index]);
    CHECK(compute[g.index] <= 7);
    CHECK(media[g.index] <= 1);
  }
}

}  // namespace

TEST_CASE("a static instance is chosen before carving a reconfigurable GPU", "[placement][mig]") {
  const auto profile = GENERATE(bundle(), spread());
  INFO(profile.name);
  Cluster c;
  c.upsert_node(mixed_a100());
  // Make the reconfigurable GPU the busier one: bundle would otherwise like it.
  Allocation busy = alloc("busy", "mixed");
  busy.mig = {{1, "4g.40gb", 0}};
  REQUIRE(c.commit(busy));
  for (int i = 0; i < 3; ++i) {
    const auto got = place_commit(c, mig("1g.10gb"), profile, "s" + std::to_string(i), "mixed");
    REQUIRE(got.size() == 1);
    CHECK(got[0].gpu == 0);
  }
  // Static 1g.10gb instances used up: now GPU 1 is carved.
  const auto carved = place_commit(c, mig("1g.10gb"), profile, "r", "mixed");
  CHECK(carved[0].gpu == 1);
  CHECK(carved[0].start >= 4);
  // 3g.40gb exists statically at 4 on GPU 0 and could be carved at 4 on GPU 1 only if free.
  const auto big = place_commit(c, mig("3g.40gb"), profile, "big", "mixed");
  CHECK(big[0].gpu == 0);
  CHECK(big[0].start == 4);
  check_mig_consistent(c, "mixed");
}

TEST_CASE("static layouts: the A100-40GB 1g.10gb is the 2-slice instance", "[placement][mig]") {
  Cluster c;
  c.upsert_node(a100_40_static("s"));
  const auto got = place_commit(c, mig("1g.10gb", 4), bundle(), "p", "s");
  REQUIRE(got.size() == 4);
  for (const auto& m : got) CHECK(m.gpu == 3);
  CHECK(c.find_node("s")->gpus[3].used.mig_slices_used == 0xFF);
  CHECK_FALSE(place(c, mig("1g.10gb"), bundle(), pod("q"), "s").ok());
  const auto small = place_commit(c, mig("1g.5gb", 8), bundle(), "small", "s");
  CHECK(small.size() == 8);  // 7 on GPU 1 and one on GPU 0
  check_mig_consistent(c, "s");
}

TEST_CASE("reconfigurable: starts keep large profiles placeable", "[placement][mig]") {
  const auto profile = GENERATE(bundle(), spread());
  const Node n = a100_80_mig("n", 1);
  SECTION("a 3g takes the upper half, leaving 4g at 0") {
    const auto pick = choose(n, mig("3g.40gb"), profile);
    REQUIRE(pick);
    CHECK(pick->mig[0].start == 4);
  }
  SECTION("small instances leave room for a 4g") {
    Cluster c;
    c.upsert_node(n);
    place_commit(c, mig("1g.10gb"), profile, "a", "n");
    place_commit(c, mig("1g.20gb"), profile, "b", "n");
    INFO("slices used " << int(c.find_node("n")->gpus[0].used.mig_slices_used));
    CHECK(place(c, mig("4g.40gb"), profile, pod("d"), "n").ok());
  }
  SECTION("small instances leave room for a 3g") {
    Cluster c;
    c.upsert_node(n);
    place_commit(c, mig("1g.10gb"), profile, "a", "n");
    place_commit(c, mig("2g.20gb"), profile, "b", "n");
    INFO("slices used " << int(c.find_node("n")->gpus[0].used.mig_slices_used));
    CHECK(place(c, mig("3g.40gb"), profile, pod("d"), "n").ok());
  }
  SECTION("two 3g instances on one GPU use both halves") {
    const auto pick = choose(n, mig("3g.40gb", 2), profile);
    REQUIRE(pick);
    REQUIRE(pick->mig.size() == 2);
    CHECK(pick->mig[0].start + pick->mig[1].start == 4);
    CHECK_FALSE(choose(n, mig("3g.40gb", 3), profile));
  }
  SECTION("seven 1g instances fill seven slices") {
    const auto pick = choose(n, mig("1g.10gb", 7), profile);
    REQUIRE(pick);
    std::vector<int> starts;
    for (const auto& m : pick->mig) starts.push_back(m.start);
    std::sort(starts.begin(), starts.end());
    CHECK(starts == std::vector<int>{0, 1, 2, 3, 4, 5, 6});
  }
  SECTION("at most one +me instance per GPU") {
    CHECK(choose(n, mig("1g.10gb+me"), profile));
    CHECK_FALSE(choose(n, mig("1g.10gb+me", 2), profile));
  }
}

TEST_CASE("MIG under bundle joins the busier GPU, under spread the emptier", "[placement][mig]") {
  Cluster c;
  c.upsert_node(a100_80_mig("n", 3));
  Allocation a = alloc("a", "n");
  a.mig = {{1, "3g.40gb", 4}};
  REQUIRE(c.commit(a));
  CHECK(choose(*c.find_node("n"), mig("2g.20gb"), bundle())->mig[0].gpu == 1);
  CHECK(choose(*c.find_node("n"), mig("2g.20gb"), spread())->mig[0].gpu == 0);
}

TEST_CASE("MIG pool instances are used when no GPU offers the profile", "[placement][mig]") {
  Node n = mig_pool_node("p", "1g.10gb", 1);
  auto pick = choose(n, mig("1g.10gb"), bundle());
  REQUIRE(pick);
  CHECK(pick->mig[0] == MigGrant{-1, "1g.10gb", -1});
  CHECK_FALSE(choose(n, mig("1g.10gb", 2), bundle()));
  // A node with both: the GPU placement wins.
  Node both = a100_80_mig("b", 1);
  both.mig_pool["1g.10gb"] = {1, 0};
  pick = choose(both, mig("1g.10gb"), bundle());
  REQUIRE(pick);
  CHECK(pick->mig[0].gpu == 0);
  // Two instances: the pool tops up once the GPU source is exhausted.
  Cluster c;
  c.upsert_node(both);
  place_commit(c, mig("7g.80gb"), bundle(), "big", "b");
  pick = choose(*c.find_node("b"), mig("1g.10gb"), bundle());
  REQUIRE(pick);
  CHECK(pick->mig[0].gpu == -1);
}

TEST_CASE("random MIG requests on reconfigurable GPUs never over-commit", "[placement][mig]") {
  const auto seed = GENERATE(range(1u, 17u));
  const auto profile = seed % 2 ? bundle() : spread();
  std::mt19937 rng(seed);
  Cluster c;
  c.upsert_node(a100_80_mig("n", 3));
  Node mixed = mixed_a100();
  mixed.name = "m";
  c.upsert_node(mixed);
  const auto& profiles = gapless::model::mig_profiles(gapless::model::MigFamily::kA100_80GB);
  std::vector<std::string> live;
  int placed = 0, refused = 0;
  for (int step = 0; step < 300; ++step) {
    if (!live.empty() && rng() % 3 == 0) {
      const std::size_t i = rng() % live.size();
      REQUIRE(c.release(live[i]));
      live.erase(live.begin() + static_cast<long>(i));
    } else {
      const auto& p = profiles[rng() % profiles.size()];
      const GpuRequest req = mig(std::string(p.name), 1 + static_cast<int>(rng() % 3));
      const std::string node = rng() % 2 ? "n" : "m";
      const std::string uid = "u" + std::to_string(step);
      const bool fits = gapless::placement::check_fit(*c.find_node(node), req).fits();
      auto a = place(c, req, profile, pod(uid), node);
      REQUIRE(a.ok() == fits);
      if (a.ok()) {
        REQUIRE(static_cast<int>(a->mig.size()) == req.mig_count);
        REQUIRE(c.commit(*a));
        live.push_back(uid);
        ++placed;
      } else {
        ++refused;
      }
    }
    check_mig_consistent(c, "n");
    check_mig_consistent(c, "m");
  }
  CHECK(placed > 20);
  CHECK(refused > 0);
  for (const auto& uid : live) CHECK(c.release(uid));
  for (const auto* n : c.nodes()) {
    for (const auto& g : n->gpus) {
      CHECK(g.used.idle());
      CHECK(g.used.mig_compute_used == 0);
      CHECK(g.used.mig_media_used == 0);
      for (bool b : g.used.mig_instance_used) CHECK_FALSE(b);
    }
  }
}
