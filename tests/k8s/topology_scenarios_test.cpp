// The scenarios of the topology issue's "Done when", on the real topologies of
// topology_fixtures.h: DGX-1 quads under nvlink-required, 1-GPU streams that keep NVLink pairs
// whole, A6000 bridge pairs, unhealthy GPUs and degraded links.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "besteffort_port.h"
#include "topology_fixtures.h"

namespace {

using namespace gapless;
using namespace gapless::test::topology;
namespace be = gapless::besteffort;

}  // namespace

TEST_CASE("DGX-1V, one NVLink pair taken: 4-GPU nvlink-required gets a true quad or a reason",
          "[topology]") {
  const model::Node dgx1 = fixture("dgx1-v100");
  int granted = 0, refused = 0;
  for (int a = 0; a < 8; ++a) {
    for (int b = a + 1; b < 8; ++b) {
      if (!dgx1.links.get(a, b).is_nvlink()) continue;
      INFO("pair " << a << "-" << b << " taken");
      const model::Cluster c = cluster_in(dgx1, {"pair", {{a, b}}});
      const std::vector<int> avail = free_gpus(*c.find_node("dgx1-v100"));
      bool quad_free = false;
      for_each_subset(avail, 4, [&](const std::vector<int>& s) {
        quad_free = quad_free || all_nvlink(dgx1, s);
      });
      auto r = placement::place(c, whole(4, TopologyWish::kNvlinkRequired), default_profile(),
                                pod("quad"), "dgx1-v100");
      REQUIRE(r.ok() == quad_free);
      if (r.ok()) {
        const std::vector<int> got = indices(*r);
        REQUIRE(got.size() == 4);
        CHECK(all_nvlink(dgx1, got));  // all 6 pairs NVLink
        for (int g : got) CHECK((g != a && g != b));
        ++granted;
      } else {
        CHECK(r.error() == "gapless: no 4 free GPUs all connected by NVLink");
        ++refused;
      }
    }
  }
  // Pairs inside a half leave the other half; the four cross pairs (i, i+4) break both.
  CHECK(granted == 12);
  CHECK(refused == 4);
}

TEST_CASE("1-GPU pods then 2-GPU pods keep NVLink pairs whole", "[topology]") {
  // For every number m of 1-GPU pods placed first, every 2-GPU pod that follows gets an NVLink
  // pair as long as the free GPUs could still be paired that way: the 1-GPU pods must not have
  // taken one GPU from each of several pairs (k8s-device-plugin#1193).
  for (const char* name : {"dgx1-v100", "a6000-4", "hgx-h100", "nvswitch-16"}) {
    const model::Node n = fixture(name);
    const int gpus = static_cast<int>(n.gpus.size());
    for (int m = 0; m <= gpus; ++m) {
      INFO(name << ": " << m << " 1-GPU pods first");
      model::Cluster c;
      c.upsert_node(n);
      for (int i = 0; i < m; ++i) {
        REQUIRE(place_commit(c, name, "one-" + std::to_string(i), whole(1)).size() == 1);
      }
      int pods = 0, nvlink_pods = 0;
      for (int i = 0;; ++i) {
        const std::vector<int> got = place_commit(c, name, "two-" + std::to_string(i), whole(2));
        if (got.empty()) break;
        ++pods;
        nvlink_pods += all_nvlink(n, got) ? 1 : 0;
      }
      CHECK(pods == (gpus - m) / 2);
      CHECK(nvlink_pods == pods);
    }
  }
}

TEST_CASE("A6000: a 1-GPU pod takes the bridge partner of a busy GPU when there is one",
          "[topology]") {
  const model::Node n = fixture("a6000-4");
  const int partner[4] = {1, 0, 3, 2};
  for (unsigned mask = 0; mask < 15; ++mask) {
    INFO("taken mask " << mask);
    State s{"mask", {}};
    for (int g = 0; g < 4; ++g) {
      if ((mask >> g) & 1u) s.pods.push_back({g});
    }
    const model::Cluster c = cluster_in(n, s);
    auto r = placement::place(c, whole(1), default_profile(), pod("one"), "a6000-4");
    REQUIRE(r.ok());
    const int got = indices(*r).at(0);
    CHECK_FALSE(((mask >> got) & 1u));
    bool half_busy_pair = false;
    for (int g = 0; g < 4; ++g) {
      half_busy_pair = half_busy_pair || (((mask >> g) & 1u) && !((mask >> partner[g]) & 1u));
    }
    // With a bridge half busy, the pick is the free half of such a bridge.
    if (half_busy_pair) CHECK(((mask >> partner[got]) & 1u));
  }
  // GPU 0 taken: GPU 1, which leaves the 2-3 bridge for a 2-GPU pod.
  model::Cluster c;
  c.upsert_node(n);
  hold(c, "a6000-4", "zero", {0});
  CHECK(place_commit(c, "a6000-4", "one", whole(1)) == std::vector<int>{1});
  CHECK(place_commit(c, "a6000-4", "two", whole(2, TopologyWish::kNvlinkRequired)) ==
        std::vector<int>{2, 3});
}

TEST_CASE("an unhealthy GPU is never chosen; the rest of the node stays schedulable",
          "[topology]") {
  for (const std::string& name : kFixtures) {
    const int gpus = static_cast<int>(fixture(name).gpus.size());
    for (int bad = 0; bad < gpus; ++bad) {
      const model::Node n =
          edited_fixture(name, [&](nlohmann::json& doc) { doc["gpus"][bad]["healthy"] = false; });
      REQUIRE_FALSE(n.gpus[bad].healthy);
      model::Cluster c;
      c.upsert_node(n);
      for (int k = 1; k < gpus; ++k) {
        INFO(name << ", GPU " << bad << " unhealthy, k " << k);
        for (auto wish : {TopologyWish::kNvlinkPreferred, TopologyWish::kNone}) {
          auto r = placement::place(c, whole(k, wish), default_profile(), pod("p"), name);
          REQUIRE(r.ok());
          const auto got = indices(*r);
          CHECK(std::find(got.begin(), got.end(), bad) == got.end());
        }
        auto req = placement::place(c, whole(k, TopologyWish::kNvlinkRequired), default_profile(),
                                    pod("p"), name);
        if (req.ok()) {
          const auto got = indices(*req);
          CHECK(std::find(got.begin(), got.end(), bad) == got.end());
          CHECK((k == 1 || all_nvlink(n, got)));
        }
      }
      CHECK_FALSE(placement::place(c, whole(gpus), default_profile(), pod("all"), name).ok());
      // 1-GPU pods fill every healthy GPU and never the bad one.
      for (int i = 0; i < gpus - 1; ++i) {
        const auto got = place_commit(c, name, "one-" + std::to_string(i), whole(1));
        REQUIRE(got.size() == 1);
        CHECK(got[0] != bad);
      }
      CHECK(place_commit(c, name, "extra", whole(1)).empty());
    }
  }
}

TEST_CASE("a degraded NVLink counts as PCIe", "[topology]") {
  // A6000 with the 0-1 bridge degraded: only 2-3 is an NVLink pair.
  const model::Node n = edited_fixture("a6000-4", [](nlohmann::json& doc) {
    for (auto& l : doc["links"]) {
      if (l["a"] == 0 && l["b"] == 1) l["degraded"] = true;
    }
  });
  const model::Link link = n.links.get(0, 1);
  CHECK_FALSE(link.is_nvlink());
  CHECK(link.weight() == fixture("t4-4").links.get(0, 2).weight());  // as a SYS path
  CHECK((n.links.nvlink_mask(0) & 0b10u) == 0);
  CHECK(be::pair_score(link) == 10);
  {
    model::Cluster c;
    c.upsert_node(n);
    CHECK(place_commit(c, "a6000-4", "a", whole(2, TopologyWish::kNvlinkRequired)) ==
          std::vector<int>{2, 3});
    // 0 and 1 are left, and they are no longer an NVLink pair.
    auto r = placement::place(c, whole(2, TopologyWish::kNvlinkRequired), default_profile(),
                              pod("b"), "a6000-4");
    REQUIRE_FALSE(r.ok());
    CHECK(r.error() == "gapless: no 2 free GPUs all connected by NVLink");
    CHECK(place_commit(c, "a6000-4", "b", whole(2)) == std::vector<int>{0, 1});  // preferred
  }
  // DGX-1V with the NV2 link 0-3 degraded: no 4-GPU NVLink set is left in the lower half, so
  // an nvlink-required quad must come from the upper half.
  const model::Node dgx1 = edited_fixture("dgx1-v100", [](nlohmann::json& doc) {
    for (auto& l : doc["links"]) {
      if (l["a"] == 0 && l["b"] == 3) l["degraded"] = true;
    }
  });
  CHECK_FALSE(dgx1.links.get(0, 3).is_nvlink());
  model::Cluster c;
  c.upsert_node(dgx1);
  CHECK(place_commit(c, "dgx1-v100", "q1", whole(4, TopologyWish::kNvlinkRequired)) ==
        std::vector<int>{4, 5, 6, 7});
  auto r = placement::place(c, whole(4, TopologyWish::kNvlinkRequired), default_profile(),
                            pod("q2"), "dgx1-v100");
  REQUIRE_FALSE(r.ok());
  CHECK(r.error() == "gapless: no 4 free GPUs all connected by NVLink");
  // A 2-GPU pod still gets an NVLink pair, never the degraded 0-3.
  const auto pair = place_commit(c, "dgx1-v100", "p", whole(2));
  CHECK(all_nvlink(dgx1, pair));
  CHECK(pair != std::vector<int>{0, 3});
}
