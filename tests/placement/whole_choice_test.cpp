// Which whole GPUs a pod gets inside a node: NVLink sets on DGX-1 and NVSwitch boxes, NUMA
// neighbourhoods on PCIe boxes, and bundle's "keep NVLink islands intact" for 1-GPU pods.
#include <catch2/catch.hpp>

#include <set>
#include <string>
#include <vector>

#include "gapless/placement/choice.h"
#include "gapless/placement/engine.h"
#include "test_nodes.h"

namespace {

using namespace gapless::testnodes;
using gapless::model::Cluster;
using gapless::model::GpuRequest;
using gapless::model::Node;
using gapless::model::TopologyWish;
using gapless::placement::choose;
using gapless::placement::place;

constexpr TopologyWish kReq = TopologyWish::kNvlinkRequired;
constexpr TopologyWish kPref = TopologyWish::kNvlinkPreferred;

std::vector<int> indices(const gapless::placement::Choice& c) {
  std::vector<int> out;
  for (const auto& g : c.gpus) out.push_back(g.index);
  return out;
}

// Node with the GPUs in `mask` held whole.
Node with_taken(Node n, unsigned mask) {
  for (auto& g : n.gpus) g.used.whole = (mask >> g.index) & 1u;
  return n;
}

bool all_nvlinked(const Node& n, const std::vector<int>& gpus) {
  for (std::size_t i = 0; i < gpus.size(); ++i) {
    for (std::size_t j = i + 1; j < gpus.size(); ++j) {
      if (!n.links.get(gpus[i], gpus[j]).is_nvlink()) return false;
    }
  }
  return true;
}

// Places `req` on `node` in `c` and commits it; returns the GPU indices.
std::vector<int> place_commit(Cluster& c, const GpuRequest& req,
                              const gapless::placement::Profile& profile, const std::string& uid,
                              const std::string& node) {
  auto a = place(c, req, profile, pod(uid), node);
  REQUIRE(a.ok());
  REQUIRE(c.commit(*a));
  std::vector<int> out;
  for (const auto& g : a->gpus) out.push_back(g.index);
  return out;
}

}  // namespace

TEST_CASE("DGX-1: a 2-GPU nvlink-preferred pod gets an NVLink pair", "[placement][whole]") {
  const auto profile = GENERATE(bundle(), spread());
  INFO(profile.name);
  const Node empty = dgx1_v100();
  const auto c = choose(empty, whole(2, kPref), profile);
  REQUIRE(c);
  CHECK(all_nvlinked(empty, indices(*c)));
  // Any NVLink pair weighs at least one lane (100); the best PCIe path (PIX) weighs 50.
  CHECK(c->connectivity >= 100.0 / gapless::model::Link::kMaxWeight - 1e-9);
  // From every occupancy that leaves an NVLink pair free.
  int states = 0;
  for (unsigned mask = 0; mask < 256; ++mask) {
    const Node n = with_taken(dgx1_v100(), mask);
    bool pair_free = false;
    for (int a = 0; a < 8; ++a) {
      for (int b = a + 1; b < 8; ++b) {
        pair_free = pair_free || (!((mask >> a) & 1u) && !((mask >> b) & 1u) && dgx1_linked(a, b));
      }
    }
    if (!pair_free) continue;
    ++states;
    const auto pick = choose(n, whole(2, kPref), profile);
    REQUIRE(pick);
    INFO("taken mask " << mask);
    CHECK(all_nvlinked(n, indices(*pick)));
    for (int g : indices(*pick)) CHECK_FALSE((mask >> g) & 1u);
  }
  CHECK(states > 100);
}

TEST_CASE("DGX-1: 4-GPU nvlink-required gets a full quad or nothing", "[placement][whole]") {
  const auto profile = GENERATE(bundle(), spread());
  INFO(profile.name);
  const std::vector<int> low = {0, 1, 2, 3}, high = {4, 5, 6, 7};
  for (unsigned mask = 0; mask < 256; ++mask) {
    INFO("taken mask " << mask);
    const Node n = with_taken(dgx1_v100(), mask);
    const auto pick = choose(n, whole(4, kReq), profile);
    const bool low_free = (mask & 0x0Fu) == 0, high_free = (mask & 0xF0u) == 0;
    REQUIRE(pick.has_value() == (low_free || high_free));
    if (!pick) continue;
    const auto got = indices(*pick);
    CHECK((got == low || got == high));
    if (!low_free) CHECK(got == high);
    if (!high_free) CHECK(got == low);
  }
}

TEST_CASE("DGX-1: nvlink-required is refused through place() when no quad is free",
          "[placement][whole]") {
  Cluster c;
  c.upsert_node(dgx1_v100("dgx1"));
  for (auto [uid, gpu] : {std::pair{"a", 0}, std::pair{"b", 5}}) {
    gapless::model::Allocation a = alloc(uid, "dgx1");
    a.gpus = {whole_grant(gpu)};
    REQUIRE(c.commit(a));
  }
  auto r = place(c, whole(4, kReq), bundle(), pod("q"), "dgx1");
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.error(), Catch::Contains("NVLink"));
  CHECK(place(c, whole(4, kPref), bundle(), pod("q"), "dgx1").ok());  // preferred still fits
  CHECK(c.release("a"));
  CHECK(place_commit(c, whole(4, kReq), bundle(), "q", "dgx1") == std::vector<int>{0, 1, 2, 3});
  CHECK_FALSE(place(c, whole(4, kReq), bundle(), pod("r"), "dgx1").ok());
}

TEST_CASE("DGX-1: a 4-GPU nvlink-preferred pod on an empty node gets a quad",
          "[placement][whole]") {
  const auto profile = GENERATE(bundle(), spread());
  const auto pick = choose(dgx1_v100(), whole(4, kPref), profile);
  REQUIRE(pick);
  CHECK(all_nvlinked(dgx1_v100(), indices(*pick)));
}

TEST_CASE("DGX-1 under bundle: 1-GPU pods fill one quad before the other", "[placement][whole]") {
  Cluster c;
  c.upsert_node(dgx1_v100("dgx1"));
  std::set<int> taken;
  for (int i = 0; i < 4; ++i) {
    for (int g : place_commit(c, whole(1), bundle(), "p" + std::to_string(i), "dgx1")) {
      taken.insert(g);
    }
  }
  const bool one_quad = taken == std::set<int>{0, 1, 2, 3} || taken == std::set<int>{4, 5, 6, 7};
  CHECK(one_quad);
  // The other quad is still intact for a 4-GPU nvlink-required pod.
  CHECK(place(c, whole(4, kReq), bundle(), pod("big"), "dgx1").ok());
  for (int i = 4; i < 8; ++i) {
    for (int g : place_commit(c, whole(1), bundle(), "p" + std::to_string(i), "dgx1")) {
      CHECK(taken.insert(g).second);
    }
  }
  CHECK(taken.size() == 8);
  CHECK_FALSE(place(c, whole(1), bundle(), pod("none"), "dgx1").ok());
}

TEST_CASE("DGX-1 under bundle: a 1-GPU pod joins the busiest NVLink neighbourhood",
          "[placement][whole]") {
  // GPUs 4 and 5 busy: the free GPU with most busy NVLink peers is 6 or 7 (peers 4, 5 of 4),
  // not 1 (peer 5 only) or 0 (peer 4 only).
  const auto pick = choose(with_taken(dgx1_v100(), 0x30), whole(1), bundle());
  REQUIRE(pick);
  CHECK((indices(*pick) == std::vector<int>{6} || indices(*pick) == std::vector<int>{7}));
  // Spread goes where no NVLink peer is busy: 2 or 3.
  const auto away = choose(with_taken(dgx1_v100(), 0x30), whole(1), spread());
  REQUIRE(away);
  CHECK((indices(*away) == std::vector<int>{2} || indices(*away) == std::vector<int>{3}));
}

TEST_CASE("DGX-1 under spread: consecutive 1-GPU pods avoid NVLink neighbours",
          "[placement][whole]") {
  Cluster c;
  c.upsert_node(dgx1_v100("dgx1"));
  const int a = place_commit(c, whole(1), spread(), "a", "dgx1").at(0);
  const int b = place_commit(c, whole(1), spread(), "b", "dgx1").at(0);
  CHECK_FALSE(dgx1_linked(a, b));
}

TEST_CASE("NVSwitch H100: any set is NVLinked, lowest free indices win", "[placement][whole]") {
  const auto profile = GENERATE(bundle(), spread());
  const Node n = with_taken(h100_nvswitch(), 0b00100101);  // 0, 2, 5 taken
  for (int k = 1; k <= 5; ++k) {
    const auto pick = choose(n, whole(k, kReq), profile);
    REQUIRE(pick);
    const auto got = indices(*pick);
    REQUIRE(static_cast<int>(got.size()) == k);
    const std::vector<int> expected = {1, 3, 4, 6, 7};
    CHECK(got == std::vector<int>(expected.begin(), expected.begin() + k));
    CHECK(all_nvlinked(n, got));
  }
  CHECK_FALSE(choose(n, whole(6, kReq), profile));
  CHECK(choose(h100_nvswitch(), whole(8, kReq), profile)->gpus.size() == 8);
}

TEST_CASE("PCIe T4: bundle packs a NUMA half, spread opens the other", "[placement][whole]") {
  const Node n = with_taken(t4_node(), 0b0001);  // GPU 0 (NUMA 0) taken
  CHECK(indices(*choose(n, whole(1), bundle())) == std::vector<int>{1});
  CHECK(indices(*choose(n, whole(1), spread())) == std::vector<int>{2});
  const Node m = with_taken(t4_node(), 0b0100);  // GPU 2 (NUMA 1) taken
  CHECK(indices(*choose(m, whole(1), bundle())) == std::vector<int>{3});
  CHECK(indices(*choose(m, whole(1), spread())) == std::vector<int>{0});
}

TEST_CASE("whole picks use only idle, healthy GPUs of allowed models", "[placement][whole]") {
  Node n = with_unhealthy(t4_node("t4", 8), 5);
  n.gpus[2].model = n.gpus[3].model = "NVIDIA-L4";
  normalize(n);
  n.gpus[0].used.memory_used_mib = 100;  // a share on GPU 0
  n.gpus[0].used.shared_pods = 1;
  n.gpus[6].used.whole = true;
  GpuRequest t4s = whole(3);
  t4s.models = {kT4};
  for (const auto& profile : {bundle(), spread()}) {
    const auto pick = choose(n, t4s, profile);
    REQUIRE(pick);
    CHECK(indices(*pick) == std::vector<int>{1, 4, 7});
    for (const auto& g : pick->gpus) {
      CHECK(g.whole());
      CHECK(g.uuid == n.gpus[g.index].uuid);
    }
    CHECK_FALSE(choose(n, whole(6), profile));  // 1, 2, 3, 4, 7 free and healthy: only 5
    CHECK(choose(n, whole(5), profile));
  }
  Node fenced = t4_node();
  fenced.fence_reason = "x";
  CHECK_FALSE(choose(fenced, whole(1), bundle()));
}

TEST_CASE("degraded NVLink does not satisfy nvlink-required", "[placement][whole]") {
  Node n = t4_node("n", 2);
  auto link = nvlink(2);
  n.links.set(0, 1, link);
  CHECK(choose(n, whole(2, kReq), bundle()));
  link.degraded = true;
  n.links.set(0, 1, link);
  CHECK_FALSE(choose(n, whole(2, kReq), bundle()));
  CHECK(choose(n, whole(2, kPref), bundle()));
}

TEST_CASE("large node: nvlink-required finds the NVLink set greedy growth misses",
          "[placement][whole]") {
  // 24 GPUs: A = 0..7 fully NVLinked; traps 8..15, trap i linked to 4 GPUs of A and to all of
  // B = 16..23, which are busy. Under bundle the traps score higher (busy peers), so growing a set
  // greedily from any seed takes a trap and gets stuck; A is the only 8-GPU NVLink set.
  Node n = pcie_node("big", 24, kH100, 81559);
  for (int a = 0; a < 8; ++a) {
    for (int b = a + 1; b < 8; ++b) n.links.set(a, b, nvlink(18));
  }
  for (int i = 0; i < 8; ++i) {
    for (int j = 0; j < 4; ++j) n.links.set(8 + i, (i + j) % 8, nvlink(18));
    for (int b = 16; b < 24; ++b) n.links.set(8 + i, b, nvlink(18));
  }
  Cluster c;
  c.upsert_node(n);
  gapless::model::Allocation busy = alloc("busy", "big");
  for (int b = 16; b < 24; ++b) busy.gpus.push_back(whole_grant(b));
  REQUIRE(c.commit(busy));

  const auto fit = gapless::placement::check_fit(*c.find_node("big"), whole(8, kReq));
  REQUIRE(fit.fits());
  for (const auto& profile : {bundle(), spread()}) {
    const auto pick = choose(*c.find_node("big"), whole(8, kReq), profile);
    REQUIRE(pick);
    CHECK(indices(*pick) == std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7});
    CHECK(gapless::placement::score_node(*c.find_node("big"), whole(8, kReq), profile) >= 0.0);
  }
  CHECK(place_commit(c, whole(8, kReq), bundle(), "p", "big") ==
        std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7});
}

// Six GPUs: a fully NVLinked quad {0..3} and an NVLinked pair {4,5}, nothing between them.
Node quad_and_pair(const std::string& name) {
  Node n = pcie_node(name, 6, kH100, 81559);
  for (int a = 0; a < 6; ++a) {
    for (int b = a + 1; b < 6; ++b) {
      if ((a < 4 && b < 4) || (a == 4 && b == 5)) n.links.set(a, b, nvlink(18));
    }
  }
  return n;
}

TEST_CASE("node score: a 2-GPU pod prefers the node where it fits a fragment over breaking a quad",
          "[placement][whole][islands]") {
  // Same fill, same pair quality: on "pair free" the pod can take an NVLink pair without cutting
  // into the largest island by more than one GPU; on "pair broken" the quad is the only NVLink
  // island left and any pair halves it.
  const Node pair_free = with_taken(quad_and_pair("pair-free"), 1u << 0);
  const Node pair_broken = with_taken(quad_and_pair("pair-broken"), 1u << 4);
  const GpuRequest req = whole(2, kPref);
  for (const auto& profile : {bundle(), spread()}) {
    INFO(profile.name);
    CHECK(gapless::placement::score_node(pair_free, req, profile) >
          gapless::placement::score_node(pair_broken, req, profile));
  }
}
