// Property test: random small clusters and random request streams go through filter, prioritize,
// place and commit, with random releases and re-upserts. After every step the usage counters
// equal the usage recomputed from Cluster::allocations(), nothing is over-committed, and releasing
// everything leaves every GPU idle.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "gapless/placement/engine.h"
#include "test_nodes.h"

namespace {

using namespace gapless::testnodes;
using gapless::Status;
using gapless::model::Allocation;
using gapless::model::Cluster;
using gapless::model::GpuRequest;
using gapless::model::GpuUsage;
using gapless::model::Node;
using gapless::model::TopologyWish;

int pick(std::mt19937& rng, int n) {
  return static_cast<int>(rng() % static_cast<unsigned>(n));
}

Node random_node(std::mt19937& rng, const std::string& name) {
  Node n;
  switch (pick(rng, 9)) {
    case 7:
      n = t4_node(name, 16);
      break;  // 16 GPUs: greedy set search for 6..10 GPUs
    case 8:
      n = pcie_node(name, 16, kH100, 81559);
      for (int a = 0; a < 16; ++a) {
        for (int b = a + 1; b < 16; ++b) {
          if (a / 8 == b / 8 || pick(rng, 2) == 0) n.links.set(a, b, nvlink(18));
        }
      }
      break;
    case 0:
      n = t4_node(name, 1 + pick(rng, 8));
      break;
    case 1:
      n = h100_nvswitch(name);
      break;
    case 2:
      n = dgx1_v100(name);
      break;
    case 3:
      n = a100_80_mig(name, 1 + pick(rng, 3));
      break;
    case 4:
      n = a100_40_static(name);
      break;
    case 5:
      n = gpushare_node(name, 1 + pick(rng, 4), 8 + pick(rng, 9));
      break;
    default:
      n = mig_pool_node(name, "1g.10gb", 1 + pick(rng, 6));
      break;
  }
  if (n.gpus.size() > 1 && pick(rng, 4) == 0)
    n.gpus[pick(rng, static_cast<int>(n.gpus.size()))].healthy = false;
  return n;
}

GpuRequest random_request(std::mt19937& rng) {
  static const std::vector<std::string> kMigNames = {
      "1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb",  // 80GB
      "1g.5gb",  "2g.10gb",    "3g.20gb", "4g.20gb", "7g.40gb"};                       // 40GB
  static const std::vector<int> kWhole = {1, 1, 1, 2, 2, 4, 6, 8};
  GpuRequest r;
  switch (pick(rng, 4)) {
    case 0:
      r = whole(kWhole[pick(rng, static_cast<int>(kWhole.size()))]);
      r.topology = static_cast<TopologyWish>(pick(rng, 3));
      break;
    case 1:
      r = shared(pick(rng, 3) == 0 ? 0 : 1024 * (1 + pick(rng, 16)),
                 pick(rng, 3) == 0 ? 0 : 50 * (1 + pick(rng, 20)), 1 + pick(rng, 2));
      if (r.shared.memory_mib == 0 && r.shared.compute_milli == 0) r.shared.compute_milli = 100;
      break;
    case 2:
      r = mig(kMigNames[pick(rng, static_cast<int>(kMigNames.size()))], 1 + pick(rng, 3));
      break;
    default:
      r = gpushare(1 + pick(rng, 8));
      break;
  }
  return r;
}

std::string describe(const GpuRequest& r) {
  switch (r.kind) {
    case gapless::model::RequestKind::kWhole:
      return "whole " + std::to_string(r.whole) + " wish " +
             std::to_string(static_cast<int>(r.topology));
    case gapless::model::RequestKind::kShared:
      return "shared " + std::to_string(r.shared.memory_mib) + " MiB " +
             std::to_string(r.shared.compute_milli) + " milli x" + std::to_string(r.shared.count);
    case gapless::model::RequestKind::kMig:
      return "mig " + r.mig_profile + " x" + std::to_string(r.mig_count);
    case gapless::model::RequestKind::kGpushare:
      return "gpushare " + std::to_string(r.gpushare_units);
    case gapless::model::RequestKind::kNone:
      break;
  }
  return "none";
}

// bundle, spread, or a random mix of both with random level weights.
gapless::placement::Profile random_profile(std::mt19937& rng) {
  switch (pick(rng, 3)) {
    case 0:
      return bundle();
    case 1:
      return spread();
    default:
      break;
  }
  static const double kWeights[] = {0.0, 0.5, 1.0, 3.0};
  gapless::placement::Profile p = bundle();
  p.name = "mixed";
  p.node = {{gapless::placement::find_strategy("bundle"), 1.0 + pick(rng, 3)},
            {gapless::placement::find_strategy("spread"), 1.0 + pick(rng, 3)}};
  p.gpu = {{gapless::placement::find_strategy(pick(rng, 2) ? "bundle" : "spread"), 1.0}};
  p.gpu_weight = kWeights[pick(rng, 4)];
  p.topology_weight = kWeights[pick(rng, 4)];
  return p;
}

// Usage of one node recomputed from the allocations alone; fails the test on any over-commit.
void check_node(const Cluster& c, const Node& n) {
  std::vector<GpuUsage> want(n.gpus.size());
  for (const auto& g : n.gpus)
    want[g.index].mig_instance_used.assign(g.mig.instances.size(), false);
  std::map<std::string, int> pool;
  for (const Allocation* a : c.allocations()) {
    if (a->node != n.name) continue;
    for (const auto& gr : a->gpus) {
      REQUIRE(gr.index >= 0);
      REQUIRE(gr.index < static_cast<int>(n.gpus.size()));
      GpuUsage& u = want[gr.index];
      if (gr.whole()) {
        REQUIRE(u.idle());
        u.whole = true;
        continue;
      }
      REQUIRE_FALSE(u.whole);
      u.gpushare_used += gr.gpushare_units;
      if (gr.memory_mib > 0 || gr.compute_milli > 0) {
        u.memory_used_mib += gr.memory_mib;
        u.compute_used_milli += gr.compute_milli;
        ++u.shared_pods;
      }
    }
    for (const auto& m : a->mig) {
      if (m.gpu == -1) {
        ++pool[m.profile];
        continue;
      }
      const auto& gpu = n.gpus[m.gpu];
      const auto* p = gapless::model::find_mig_profile(gpu.mig_family, m.profile);
      REQUIRE(p != nullptr);
      REQUIRE(gpu.mig.enabled);
      REQUIRE(std::find(p->starts.begin(), p->starts.end(), m.start) != p->starts.end());
      GpuUsage& u = want[m.gpu];
      const auto bits = gapless::model::mig_slice_mask(m.start, p->memory_slices);
      REQUIRE((u.mig_slices_used & bits) == 0);
      u.mig_slices_used |= bits;
      u.mig_compute_used += p->compute_slices;
      u.mig_media_used += p->media_extensions ? 1 : 0;
      for (std::size_t i = 0; i < gpu.mig.instances.size(); ++i) {
        const auto& inst = gpu.mig.instances[i];
        if (inst.profile == m.profile && inst.start == m.start) u.mig_instance_used[i] = true;
      }
    }
  }
  for (const auto& g : n.gpus) {
    const GpuUsage& u = want[g.index];
    INFO("node " << n.name << " GPU " << g.index);
    CHECK(g.used == u);
    CHECK(u.memory_used_mib <= g.memory_mib);
    CHECK(u.compute_used_milli <= gapless::model::kFullComputeMilli);
    CHECK(u.gpushare_used <= g.gpushare_capacity);
    CHECK(u.mig_compute_used <= gapless::model::kMigComputeSlices);
    CHECK(u.mig_media_used <= 1);
    const int kinds = (u.whole ? 1 : 0) + (u.shared_pods > 0 ? 1 : 0) +
                      (u.gpushare_used > 0 ? 1 : 0) + (u.mig_slices_used != 0 ? 1 : 0);
    CHECK(kinds <= 1);
    if (!u.idle()) CHECK(g.healthy);
  }
  for (const auto& [profile, counts] : n.mig_pool) {
    CHECK(counts.used == pool[profile]);
    CHECK(counts.used <= counts.total);
  }
}

void check_all(const Cluster& c) {
  for (const Node* n : c.nodes()) check_node(c, *n);
}

}  // namespace

TEST_CASE("random streams never over-commit and release back to idle", "[placement][property]") {
  const unsigned seed = GENERATE(range(1u, 41u));
  INFO("seed " << seed);
  std::mt19937 rng(seed);
  Cluster c;
  std::vector<Node> inventory;
  std::vector<std::string> names;
  const int node_count = 1 + pick(rng, 4);
  for (int i = 0; i < node_count; ++i) {
    inventory.push_back(random_node(rng, "n" + std::to_string(i)));
    names.push_back(inventory.back().name);
    c.upsert_node(inventory.back());
  }
  // Profiles live as long as the cache, as a policy's do in the extender.
  std::vector<gapless::placement::Profile> profiles;
  for (int i = 0; i < 6; ++i) profiles.push_back(random_profile(rng));
  gapless::placement::VerdictCache cache(4);  // fewer tables than shapes: eviction is exercised
  std::vector<std::string> live;
  int placed = 0, refused = 0;
  for (int step = 0; step < 400; ++step) {
    const int action = pick(rng, 10);
    if (action < 3 && !live.empty()) {
      const int i = pick(rng, static_cast<int>(live.size()));
      REQUIRE(c.release(live[i]));
      live.erase(live.begin() + i);
    } else if (action == 3) {
      const int i = pick(rng, node_count);
      c.upsert_node(inventory[i]);  // same inventory: allocations re-applied, nothing fenced
      CHECK_FALSE(c.find_node(names[i])->fenced());
    } else {
      const GpuRequest req = random_request(rng);
      const auto& profile = profiles[pick(rng, static_cast<int>(profiles.size()))];
      const auto f = gapless::placement::filter(c, req, names);
      const auto scores = gapless::placement::prioritize(c, req, profile, names);
      REQUIRE(scores.size() == names.size());
      // The cache must never change an answer, whatever changed since it was filled.
      const auto cached = gapless::placement::filter(c, req, names, &cache);
      CHECK(cached.passed == f.passed);
      CHECK(cached.failed() == f.failed());
      CHECK(cached.unresolvable() == f.unresolvable());
      CHECK(gapless::placement::prioritize(c, req, profile, names, &cache) == scores);
      // The best-scored node that passed, ties to the first.
      std::string best;
      int best_score = -1;
      for (std::size_t i = 0; i < names.size(); ++i) {
        CHECK(scores[i] >= 0);
        CHECK(scores[i] <= 10);
        const bool passed = std::find(f.passed.begin(), f.passed.end(), names[i]) != f.passed.end();
        if (passed && scores[i] > best_score) {
          best_score = scores[i];
          best = names[i];
        }
        if (passed) {
          auto r = gapless::placement::place(c, req, profile, pod("x"), names[i]);
          INFO(describe(req) << " on " << names[i] << " under " << profile.name << ": "
                             << (r.ok() ? "" : r.error()));
          CHECK(r.ok());
        } else {
          CHECK(scores[i] == 0);
          CHECK_FALSE(gapless::placement::place(c, req, profile, pod("x"), names[i]).ok());
        }
      }
      if (best.empty()) {
        ++refused;
      } else {
        const std::string uid = "u" + std::to_string(step);
        auto a = gapless::placement::place(c, req, profile, pod(uid), best);
        REQUIRE(a.ok());
        CHECK(static_cast<int>(a->gpus.size() + a->mig.size()) == req.units());
        Status s = c.commit(*a);
        INFO(s.error());
        REQUIRE(s.ok());
        live.push_back(uid);
        ++placed;
      }
    }
    check_all(c);
  }
  CHECK(placed > 0);
  CHECK(placed + refused > 100);
  CHECK(c.allocation_count() == live.size());
  std::shuffle(live.begin(), live.end(), rng);
  for (const auto& uid : live) REQUIRE(c.release(uid));
  CHECK(c.allocation_count() == 0);
  for (const Node* n : c.nodes()) {
    for (const auto& g : n->gpus) {
      INFO("node " << n->name << " GPU " << g.index);
      GpuUsage idle;
      idle.mig_instance_used.assign(g.mig.instances.size(), false);
      CHECK(g.used == idle);
    }
    for (const auto& [profile, counts] : n->mig_pool) CHECK(counts.used == 0);
  }
}
