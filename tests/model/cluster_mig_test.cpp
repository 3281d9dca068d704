// Cluster::commit / release of MIG grants: static layouts, reconfigurable GPUs (overlap, starts,
// +me, compute slices) and GFD MIG pools.
#include <catch2/catch.hpp>

#include <functional>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "../placement/test_nodes.h"
#include "gapless/model/cluster.h"

namespace {

using namespace gapless::testnodes;
using gapless::Status;
using gapless::model::Allocation;
using gapless::model::apply_allocation;
using gapless::model::Cluster;
using gapless::model::GpuUsage;
using gapless::model::MigGrant;
using gapless::model::Node;
using gapless::model::unapply_allocation;

Cluster make_cluster() {
  Cluster c;
  c.upsert_node(a100_80_mig("reconf", 2));
  c.upsert_node(a100_40_static("static"));
  c.upsert_node(mig_pool_node("pool", "1g.10gb", 2));
  c.upsert_node(t4_node("t4"));
  return c;
}

Allocation with_mig(const std::string& uid, const std::string& node, std::vector<MigGrant> mig) {
  Allocation a = alloc(uid, node);
  a.mig = std::move(mig);
  return a;
}

const GpuUsage& used(const Cluster& c, const std::string& node, int gpu) {
  return c.find_node(node)->gpus[gpu].used;
}

}  // namespace

TEST_CASE("reconfigurable MIG: valid placements commit and release", "[model][cluster][mig]") {
  Cluster c = make_cluster();
  REQUIRE(c.commit(with_mig("a", "reconf", {{0, "3g.40gb", 4}})));
  REQUIRE(c.commit(with_mig("b", "reconf", {{0, "2g.20gb", 0}, {0, "1g.10gb", 2}})));
  const GpuUsage& u = used(c, "reconf", 0);
  CHECK(u.mig_slices_used == 0xF7);  // 0-1, 2, 4-7
  CHECK(u.mig_compute_used == 6);
  CHECK(u.mig_media_used == 0);
  CHECK_FALSE(u.idle());
  CHECK(used(c, "reconf", 1).idle());
  REQUIRE(c.commit(with_mig("c", "reconf", {{0, "1g.10gb", 3}})));
  CHECK(used(c, "reconf", 0).mig_slices_used == 0xFF);
  CHECK(used(c, "reconf", 0).mig_compute_used == 7);

  CHECK(c.release("b"));
  CHECK(used(c, "reconf", 0).mig_slices_used == 0xF8);
  CHECK(used(c, "reconf", 0).mig_compute_used == 4);
  CHECK(c.release("a"));
  CHECK(c.release("c"));
  CHECK(usage_of(*c.find_node("reconf")) == usage_of(a100_80_mig("x", 2)));
}

TEST_CASE("reconfigurable MIG: bad grants are refused", "[model][cluster][mig]") {
  Cluster c = make_cluster();
  REQUIRE(c.commit(with_mig("held", "reconf", {{0, "3g.40gb", 0}, {0, "1g.10gb+me", 4}})));
  const auto before = usage_of(*c.find_node("reconf"));
  auto [gpu, profile, start, words] = GENERATE(table<int, const char*, int, const char*>({
      {0, "1g.10gb", 2, "overlap"},  // inside the 3g at 0
      {0, "1g.20gb", 4, "overlap"},  // covers the +me slice
      {0, "7g.80gb", 0, "overlap"},
      {0, "1g.10gb+me", 5, "+me"},        // second +me on the GPU
      {1, "3g.40gb", 2, "cannot start"},  // 3g starts only at 0 or 4
      {1, "1g.10gb", 7, "cannot start"},  // slice 7 is no 1g start
      {1, "1g.20gb", 1, "cannot start"},
      {1, "4g.40gb", 4, "cannot start"},
      {1, "2g.20gb", 6, "cannot start"},
      {1, "1g.10gb", -1, "cannot start"},
      {1, "3g.20gb", 0, "no MIG profile"},  // A100-40GB name on an 80GB GPU
      {1, "bogus", 0, "no MIG profile"},
      {2, "1g.10gb", 0, "does not exist"},
  }));
  INFO(profile << "@" << start << " on GPU " << gpu);
  Status s = c.commit(with_mig("p", "reconf", {{gpu, profile, start}}));
  CHECK_FALSE(s.ok());
  CHECK_THAT(s.error(), Catch::Contains(words));
  CHECK(usage_of(*c.find_node("reconf")) == before);
}

TEST_CASE("MIG grants on a non-MIG GPU are refused", "[model][cluster][mig]") {
  Cluster c = make_cluster();
  CHECK_THAT(c.commit(with_mig("p", "t4", {{0, "1g.10gb", 0}})).error(),
             Catch::Contains("not in MIG mode"));
  CHECK(used(c, "t4", 0).idle());
}

TEST_CASE("reconfigurable MIG: the compute budget is enforced", "[model][cluster][mig]") {
  // Valid placements never exceed 7 compute slices (see the exhaustive test below); the check
  // itself is exercised on hand-set usage.
  Node n = a100_80_mig("n", 1);
  n.gpus[0].used.mig_slices_used = 0x0F;
  n.gpus[0].used.mig_compute_used = 6;
  Allocation a = with_mig("p", "n", {{0, "2g.20gb", 4}});
  Status s = apply_allocation(n, a);
  CHECK_FALSE(s.ok());
  CHECK_THAT(s.error(), Catch::Contains("compute"));
  CHECK(n.gpus[0].used.mig_compute_used == 6);
  CHECK(apply_allocation(n, with_mig("q", "n", {{0, "1g.10gb", 4}})).ok());
  CHECK(n.gpus[0].used.mig_compute_used == 7);
}

TEST_CASE("reconfigurable MIG: every reachable state is consistent", "[model][cluster][mig]") {
  // Depth-first over every sequence of single-instance grants on one A100-80GB (states deduped by
  // usage): no state has overlapping instances, more than 7 compute slices or two +me instances,
  // and undoing the last grant restores the previous state.
  const Node empty = a100_80_mig("n", 1);
  std::set<std::tuple<int, int, int>> seen;
  int states = 0;
  std::vector<MigGrant> all;
  for (const auto& p : gapless::model::mig_profiles(empty.gpus[0].mig_family)) {
    for (int s = -1; s <= 8; ++s) all.push_back({0, std::string(p.name), s});
  }
  std::function<void(Node&, int)> dfs = [&](Node& n, int held_slices) {
    const GpuUsage& u = n.gpus[0].used;
    if (!seen.insert({u.mig_slices_used, u.mig_compute_used, u.mig_media_used}).second) return;
    ++states;
    CHECK(u.mig_compute_used <= 7);
    CHECK(u.mig_media_used <= 1);
    CHECK(__builtin_popcount(u.mig_slices_used) == held_slices);
    for (const MigGrant& g : all) {
      const GpuUsage before = u;
      Allocation a = with_mig("x", "n", {g});
      if (!apply_allocation(n, a).ok()) {
        CHECK(n.gpus[0].used == before);
        continue;
      }
      const auto* p = gapless::model::find_mig_profile(n.gpus[0].mig_family, g.profile);
      REQUIRE(p != nullptr);
      CHECK(g.start + p->memory_slices <= 8);
      dfs(n, held_slices + p->memory_slices);
      unapply_allocation(n, a);
      CHECK(n.gpus[0].used == before);
    }
  };
  Node n = empty;
  dfs(n, 0);
  CHECK(states > 50);
  CHECK(n.gpus[0].used == empty.gpus[0].used);
}

TEST_CASE("static MIG layout: only listed instances, each once", "[model][cluster][mig]") {
  Cluster c = make_cluster();
  const auto idle = usage_of(*c.find_node("static"));
  REQUIRE(c.commit(with_mig("a", "static", {{0, "3g.20gb", 0}})));
  CHECK(used(c, "static", 0).mig_instance_used == std::vector<bool>{true, false, false});
  CHECK(used(c, "static", 0).mig_slices_used == 0x0F);
  CHECK(used(c, "static", 0).mig_compute_used == 3);
  // On the 40GB family 1g.10gb is the 2-slice profile.
  REQUIRE(c.commit(with_mig("b", "static", {{3, "1g.10gb", 2}})));
  CHECK(used(c, "static", 3).mig_slices_used == 0x0C);
  CHECK(used(c, "static", 3).mig_instance_used == std::vector<bool>{false, true, false, false});

  const auto before = usage_of(*c.find_node("static"));
  auto [gpu, profile, start, words] = GENERATE(table<int, const char*, int, const char*>({
      {0, "3g.20gb", 0, "taken"},
      {3, "1g.10gb", 2, "taken"},
      {0, "3g.20gb", 4, "no 3g.20gb instance"},  // valid start, but not in this layout
      {3, "1g.5gb", 0, "no 1g.5gb instance"},
      {2, "4g.20gb", 4, "cannot start"},
      {1, "1g.10gb", 1, "cannot start"},    // 2-slice profile: odd starts invalid
      {1, "1g.20gb", 0, "no MIG profile"},  // an 80GB name
  }));
  INFO(profile << "@" << start << " on GPU " << gpu);
  Status s = c.commit(with_mig("p", "static", {{gpu, profile, start}}));
  CHECK_FALSE(s.ok());
  CHECK_THAT(s.error(), Catch::Contains(words));
  CHECK(usage_of(*c.find_node("static")) == before);

  CHECK(c.release("a"));
  CHECK(c.release("b"));
  CHECK(usage_of(*c.find_node("static")) == idle);
}

TEST_CASE("static MIG layout: the whole layout can be taken and given back",
          "[model][cluster][mig]") {
  Cluster c = make_cluster();
  const Node& n = *c.find_node("static");
  const auto idle = usage_of(n);
  int k = 0;
  for (const auto& g : n.gpus) {
    for (const auto& inst : g.mig.instances) {
      REQUIRE(c.commit(
          with_mig("p" + std::to_string(k++), "static", {{g.index, inst.profile, inst.start}})));
    }
  }
  for (const auto& g : c.find_node("static")->gpus) {
    for (bool b : g.used.mig_instance_used) CHECK(b);
    CHECK(g.used.mig_compute_used <= 7);
  }
  for (int i = 0; i < k; ++i) CHECK(c.release("p" + std::to_string(i)));
  CHECK(usage_of(*c.find_node("static")) == idle);
}

TEST_CASE("MIG pool: counted instances without placement", "[model][cluster][mig]") {
  Cluster c = make_cluster();
  REQUIRE(c.commit(with_mig("a", "pool", {{-1, "1g.10gb", -1}})));
  CHECK(c.find_node("pool")->mig_pool.at("1g.10gb").used == 1);
  SECTION("exhausted all-or-nothing") {
    CHECK_FALSE(c.commit(with_mig("b", "pool", {{-1, "1g.10gb", -1}, {-1, "1g.10gb", -1}})));
    CHECK(c.find_node("pool")->mig_pool.at("1g.10gb").used == 1);
    REQUIRE(c.commit(with_mig("b", "pool", {{-1, "1g.10gb", -1}})));
    CHECK_THAT(c.commit(with_mig("c", "pool", {{-1, "1g.10gb", -1}})).error(),
               Catch::Contains("no free 1g.10gb"));
    CHECK(c.release("b"));
  }
  SECTION("profile not in the pool") {
    CHECK_FALSE(c.commit(with_mig("b", "pool", {{-1, "3g.40gb", -1}})));
    CHECK(c.find_node("pool")->mig_pool.count("3g.40gb") == 0);
  }
  CHECK(c.release("a"));
  CHECK(c.find_node("pool")->mig_pool.at("1g.10gb").used == 0);
}

TEST_CASE("mixed MIG allocation fails as a whole", "[model][cluster][mig]") {
  Cluster c = make_cluster();
  REQUIRE(c.commit(with_mig("held", "reconf", {{1, "4g.40gb", 0}})));
  const auto before = usage_of(*c.find_node("reconf"));
  // First grant fits, second overlaps the held 4g.
  CHECK_FALSE(c.commit(with_mig("p", "reconf", {{0, "7g.80gb", 0}, {1, "3g.40gb", 0}})));
  // Two grants that overlap each other.
  CHECK_FALSE(c.commit(with_mig("p", "reconf", {{0, "3g.40gb", 4}, {0, "1g.20gb", 6}})));
  CHECK(usage_of(*c.find_node("reconf")) == before);
  CHECK(c.allocation("p") == nullptr);
}

TEST_CASE("MIG placement validity: every profile at every start on every GPU type",
          "[model][cluster][mig]") {
  // docs/mig-profiles.md §1.1, by slot: (compute slices, memory slices, +me) -> allowed starts.
  // The guide gives one -lgipp table for A100-40/80GB and H100-80/94GB; H100-96GB and H200 follow
  // the same slots (§4.1, §5, derived there).
  const std::map<std::tuple<int, int, bool>, std::set<int>> kSlotStarts = {
      {{1, 1, false}, {0, 1, 2, 3, 4, 5, 6}},
      {{1, 1, true}, {0, 1, 2, 3, 4, 5, 6}},
      {{1, 2, false}, {0, 2, 4, 6}},
      {{2, 2, false}, {0, 2, 4}},
      {{3, 4, false}, {0, 4}},
      {{4, 4, false}, {0}},
      {{7, 8, false}, {0}},
  };
  const auto [product, memory] = GENERATE(table<const char*, std::int64_t>({
      {"NVIDIA-A100-SXM4-40GB", 40960},
      {"NVIDIA-A100-SXM4-80GB", 81920},
      {"NVIDIA-H100-80GB-HBM3", 81559},
      {"NVIDIA-H100-SXM5-94GB", 95830},
      {"NVIDIA-GH200-480GB", 97871},
      {"NVIDIA-H200-141GB-HBM3e", 143771},
  }));
  INFO(product);
  Node n = pcie_node("g", 1, product, memory);
  n.gpus[0].mig.enabled = true;  // reconfigurable: no instances yet
  const auto profiles = gapless::model::mig_profiles(n.gpus[0].mig_family);
  REQUIRE(profiles.size() >= 7);
  Cluster c;
  c.upsert_node(n);
  int uid = 0;
  for (const auto& p : profiles) {
    const auto slot = kSlotStarts.find({p.compute_slices, p.memory_slices, p.media_extensions});
    INFO(p.name);
    REQUIRE(slot != kSlotStarts.end());
    for (int start = 0; start < 8; ++start) {
      INFO("start " << start);
      const std::string id = "p" + std::to_string(uid++);
      const Status s = c.commit(with_mig(id, "g", {MigGrant{0, std::string(p.name), start}}));
      CHECK(s.ok() == (slot->second.count(start) == 1));
      if (s.ok()) {
        CHECK(used(c, "g", 0).mig_slices_used ==
              gapless::model::mig_slice_mask(start, p.memory_slices));
        REQUIRE(c.release(id));
      }
      CHECK(used(c, "g", 0).mig_slices_used == 0);
    }
  }
}
