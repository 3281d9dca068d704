// The extender verbs: filter buckets, prioritize ranges and ordering, score_node, place().
#include <catch2/catch.hpp>

#include <algorithm>
#include <random>
#include <set>
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
using gapless::placement::filter;
using gapless::placement::FilterResult;
using gapless::placement::place;
using gapless::placement::prioritize;
using gapless::placement::score_node;

void take_whole(Cluster& c, const std::string& node, std::vector<int> gpus,
                const std::string& uid) {
  Allocation a = alloc(uid, node);
  for (int g : gpus) a.gpus.push_back(whole_grant(g));
  REQUIRE(c.commit(a));
}

Cluster sample_cluster() {
  Cluster c;
  c.upsert_node(t4_node("t4-free"));
  c.upsert_node(t4_node("t4-full"));
  c.upsert_node(h100_nvswitch("h100"));
  c.upsert_node(dgx1_v100("dgx1"));
  c.upsert_node(a100_80_mig("a100", 2));
  c.upsert_node(gpushare_node("gs", 2, 16));
  c.upsert_node(t4_node("t4-fenced"));
  take_whole(c, "t4-full", {0, 1, 2, 3}, "full");
  c.fence("t4-fenced", "record unreadable");
  return c;
}

const std::vector<std::string> kInput = {"t4-full", "h100", "ghost", "t4-free",   "dgx1",
                                         "a100",    "gs",   "h100",  "t4-fenced", "ghost"};

// Every distinct input name in exactly one bucket; labels exactly for the failures.
void check_buckets(const FilterResult& r, const std::vector<std::string>& input) {
  std::set<std::string> distinct(input.begin(), input.end());
  std::multiset<std::string> all(r.passed.begin(), r.passed.end());
  for (const auto& [n, reason] : r.failed()) all.insert(n);
  for (const auto& [n, reason] : r.unresolvable()) all.insert(n);
  CHECK(all == std::multiset<std::string>(distinct.begin(), distinct.end()));
  CHECK(r.labels().size() == r.failed().size() + r.unresolvable().size());
  for (const auto& [n, reason] : r.failed()) {
    CHECK(r.labels().count(n) == 1);
    CHECK_FALSE(reason.empty());
    CHECK_THAT(reason, !Catch::Contains(n));
  }
  for (const auto& [n, reason] : r.unresolvable()) {
    CHECK(r.labels().count(n) == 1);
    CHECK_FALSE(reason.empty());
    CHECK_THAT(reason, !Catch::Contains(n));
  }
  // passed keeps the input order (first occurrence).
  std::vector<std::string> order;
  for (const auto& n : input) {
    if (std::find(r.passed.begin(), r.passed.end(), n) != r.passed.end() &&
        std::find(order.begin(), order.end(), n) == order.end()) {
      order.push_back(n);
    }
  }
  CHECK(r.passed == order);
}

}  // namespace

TEST_CASE("filter sorts every node into one bucket", "[placement][engine]") {
  const Cluster c = sample_cluster();
  const FilterResult r = filter(c, whole(2), kInput);
  check_buckets(r, kInput);
  CHECK(r.passed == std::vector<std::string>{"h100", "t4-free", "dgx1"});
  CHECK(r.failed().count("t4-full") == 1);
  CHECK(r.labels().at("t4-full") == "insufficient_free_gpus");
  CHECK(r.failed().count("t4-fenced") == 1);
  CHECK(r.labels().at("t4-fenced") == "node_fenced");
  CHECK(r.unresolvable().count("ghost") == 1);
  CHECK(r.labels().at("ghost") == "unknown_node");
  CHECK(r.unresolvable().count("a100") == 1);
  CHECK(r.unresolvable().count("gs") == 1);
}

TEST_CASE("filter passes every node for a pod without GPUs", "[placement][engine]") {
  const Cluster c = sample_cluster();
  const FilterResult r = filter(c, GpuRequest{}, kInput);
  CHECK(r.passed == std::vector<std::string>{"t4-full", "h100", "ghost", "t4-free", "dgx1", "a100",
                                             "gs", "t4-fenced"});
  CHECK(r.failed().empty());
  CHECK(r.unresolvable().empty());
  CHECK(r.labels().empty());
  CHECK(filter(c, whole(1), {}).passed.empty());
}

TEST_CASE("filter buckets hold for every request kind", "[placement][engine]") {
  const Cluster c = sample_cluster();
  const std::vector<GpuRequest> reqs = {whole(1),
                                        whole(4, gapless::model::TopologyWish::kNvlinkRequired),
                                        whole(8),
                                        shared(8192, 250),
                                        shared(20000, 0, 2),
                                        mig("1g.10gb", 3),
                                        mig("3g.20gb"),
                                        gpushare(8),
                                        gpushare(32)};
  for (std::size_t i = 0; i < reqs.size(); ++i) {
    INFO("request " << i);
    const FilterResult r = filter(c, reqs[i], kInput);
    check_buckets(r, kInput);
    CHECK(r.unresolvable().count("ghost") == 1);
    // filter agrees with prioritize: passed nodes are exactly those with a score >= 0.
    for (const auto& name : r.passed) {
      CHECK(score_node(*c.find_node(name), reqs[i], bundle()) >= 0.0);
    }
    for (const auto& [name, reason] : r.failed()) {
      CHECK(score_node(*c.find_node(name), reqs[i], bundle()) < 0.0);
    }
  }
}

TEST_CASE("prioritize gives 0..10 for every input node", "[placement][engine]") {
  const Cluster c = sample_cluster();
  for (const auto& profile : {bundle(), spread()}) {
    for (const GpuRequest& req :
         {GpuRequest{}, whole(1), whole(2), shared(4096, 100), mig("1g.10gb"), gpushare(4)}) {
      const auto scores = prioritize(c, req, profile, kInput);
      REQUIRE(scores.size() == kInput.size());
      for (std::size_t i = 0; i < scores.size(); ++i) {
        INFO(kInput[i] << " under " << profile.name);
        CHECK(scores[i] >= 0);
        CHECK(scores[i] <= 10);
        // Nodes the pod cannot use score 0 (a pod without GPUs fits every known node).
        if (kInput[i] == "ghost" || (req.kind != gapless::model::RequestKind::kNone &&
                                     (kInput[i] == "t4-full" || kInput[i] == "t4-fenced"))) {
          CHECK(scores[i] == 0);
        }
      }
      CHECK(scores[1] == scores[7]);                         // "h100" twice
      CHECK(scores == prioritize(c, req, profile, kInput));  // determinism
    }
  }
}

TEST_CASE("same inputs give the same outputs, whatever the insertion order",
          "[placement][engine]") {
  std::mt19937 rng(7);
  std::vector<gapless::model::Node> nodes = {t4_node("a"), h100_nvswitch("b"), dgx1_v100("c"),
                                             t4_node("d"), gpushare_node("e"), a100_80_mig("f")};
  const std::vector<std::string> names = {"a", "b", "c", "d", "e", "f"};
  auto build = [&](std::vector<gapless::model::Node> order) {
    Cluster c;
    for (auto& n : order) c.upsert_node(n);
    take_whole(c, "a", {1}, "u1");
    take_whole(c, "c", {0, 5}, "u2");
    return c;
  };
  const Cluster first = build(nodes);
  for (int round = 0; round < 5; ++round) {
    std::shuffle(nodes.begin(), nodes.end(), rng);
    const Cluster other = build(nodes);
    for (const GpuRequest& req :
         {whole(1), whole(2, gapless::model::TopologyWish::kNvlinkPreferred), shared(2048, 300),
          gpushare(3), mig("2g.20gb", 2)}) {
      for (const auto& profile : {bundle(), spread()}) {
        CHECK(prioritize(first, req, profile, names) == prioritize(other, req, profile, names));
        for (const auto& n : names) {
          auto x = place(first, req, profile, pod("p"), n);
          auto y = place(other, req, profile, pod("p"), n);
          REQUIRE(x.ok() == y.ok());
          if (x.ok()) CHECK(*x == *y);
        }
      }
    }
  }
}

TEST_CASE("bundle prefers the fuller node, spread the emptier", "[placement][engine]") {
  Cluster c;
  c.upsert_node(t4_node("busy"));
  c.upsert_node(t4_node("idle"));
  take_whole(c, "busy", {0, 1}, "u");
  Allocation s = alloc("s", "busy");
  s.gpus = {share_grant(2, 4096, 250)};
  REQUIRE(c.commit(s));
  const std::vector<std::string> names = {"idle", "busy"};
  for (const GpuRequest& req : {whole(1), shared(1024, 100), shared(1024, 100, 2)}) {
    const auto b = prioritize(c, req, bundle(), names);
    const auto sp = prioritize(c, req, spread(), names);
    CHECK(b[1] > b[0]);
    CHECK(sp[0] > sp[1]);
  }
  CHECK(score_node(*c.find_node("busy"), whole(3), bundle()) < 0.0);  // only 2 free
}

TEST_CASE("score_node is -1 when the request does not fit, else in [0, 1]", "[placement][engine]") {
  const Cluster c = sample_cluster();
  for (const auto* n : c.nodes()) {
    for (const GpuRequest& req :
         {whole(1), whole(8), shared(4096, 100), mig("1g.10gb", 2), gpushare(16)}) {
      const double s = score_node(*n, req, bundle());
      const bool fits = gapless::placement::check_fit(*n, req).fits();
      INFO(n->name);
      CHECK((s >= 0.0) == fits);
      if (fits) CHECK(s <= 1.0);
      if (!fits) CHECK(s == -1.0);
    }
  }
}

TEST_CASE("place returns an allocation that commit accepts", "[placement][engine]") {
  Cluster c = sample_cluster();
  SECTION("unknown node") {
    auto r = place(c, whole(1), bundle(), pod("p"), "ghost");
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.error(), Catch::Contains("ghost"));
  }
  SECTION("node that does not fit gives the filter reason") {
    auto r = place(c, whole(1), bundle(), pod("p"), "t4-full");
    REQUIRE_FALSE(r.ok());
    CHECK(r.error() == filter(c, whole(1), {"t4-full"}).failed().at("t4-full"));
  }
  SECTION("a pod without GPUs gets an empty allocation") {
    auto r = place(c, GpuRequest{}, bundle(), pod("p"), "t4-free");
    REQUIRE(r.ok());
    CHECK(r->gpus.empty());
    CHECK(r->mig.empty());
  }
  SECTION("every kind on every node it fits") {
    int uid = 0;
    for (const GpuRequest& req : {whole(2), shared(4096, 300, 2), mig("1g.10gb", 3), gpushare(5),
                                  whole(1), mig("3g.40gb")}) {
      for (const auto* n : c.nodes()) {
        if (!gapless::placement::check_fit(*n, req).fits()) continue;
        const auto p = pod("u" + std::to_string(uid++));
        auto r = place(c, req, bundle(), p, n->name);
        REQUIRE(r.ok());
        CHECK(r->pod_uid == p.uid);
        CHECK(r->pod_ns == p.ns);
        CHECK(r->pod_name == p.name);
        CHECK(r->node == n->name);
        CHECK(static_cast<int>(r->gpus.size() + r->mig.size()) == req.units());
        CHECK(c.commit(*r).ok());
      }
    }
    CHECK(c.allocation_count() > 10);
  }
}

TEST_CASE("score_pick agrees with choose", "[placement][engine]") {
  Cluster c = sample_cluster();
  take_whole(c, "dgx1", {0, 6}, "d");
  const std::vector<GpuRequest> reqs = {whole(1),
                                        whole(3, gapless::model::TopologyWish::kNvlinkPreferred),
                                        whole(3, gapless::model::TopologyWish::kNvlinkRequired),
                                        shared(4096, 100, 2),
                                        mig("1g.10gb", 2),
                                        gpushare(4),
                                        GpuRequest{}};
  for (const auto* n : c.nodes()) {
    for (std::size_t i = 0; i < reqs.size(); ++i) {
      for (const auto& profile : {bundle(), spread()}) {
        INFO(n->name << " request " << i << " " << profile.name);
        double gs = -1, conn = -1;
        const bool ok = gapless::placement::score_pick(*n, reqs[i], profile, &gs, &conn);
        const auto choice = gapless::placement::choose(*n, reqs[i], profile);
        if (reqs[i].kind == gapless::model::RequestKind::kNone) {
          CHECK_FALSE(ok);  // nothing to score
          continue;
        }
        REQUIRE(ok == choice.has_value());
        if (!ok) continue;
        CHECK(gs == Approx(choice->gpu_score));
        CHECK(conn == Approx(choice->connectivity));
      }
    }
  }
}

TEST_CASE("normalize: the engine's best node alone gets 10, whatever the spread of scores",
          "[placement][engine][normalize]") {
  using gapless::placement::normalize_scores;
  const std::vector<std::uint64_t> rank = {5, 4, 3, 2, 1};
  // Scores 0.50 and 0.51 would both round to 5 under 10 x score; here the better one wins alone.
  CHECK(normalize_scores({0.50, 0.51, 0.10, -1, 0.30}, rank) ==
        std::vector<int>{8, 10, 0, 0, 4});  // 9 x (s - 0.10) / 0.41, rounded down
  // Equal engine scores: the lower rank is the best (10), the other gets 9, above the rest.
  CHECK(normalize_scores({0.7, 0.7, 0.2, 0.2, 0.1}, rank) == std::vector<int>{9, 10, 1, 1, 0});
  // All equal: one 10, the rest 9.
  CHECK(normalize_scores({0.4, 0.4, 0.4}, {1, 2, 3}) == std::vector<int>{10, 9, 9});
  // Nothing fits: all 0.
  CHECK(normalize_scores({-1, -1}, {1, 2}) == std::vector<int>{0, 0});
  // A strictly best node, over many random score sets: it alone gets the maximum.
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  for (int round = 0; round < 200; ++round) {
    std::vector<double> raw(12);
    std::vector<std::uint64_t> r(12);
    for (std::size_t i = 0; i < raw.size(); ++i) {
      raw[i] = u(rng);
      r[i] = rng();
    }
    const auto best = std::max_element(raw.begin(), raw.end()) - raw.begin();
    const auto out = normalize_scores(raw, r);
    CHECK(out[best] == 10);
    CHECK(std::count(out.begin(), out.end(), 10) == 1);
  }
}

TEST_CASE("the shipped policy ranks NVSwitch over DGX-1 over PCIe for a 2-GPU pod on idle nodes",
          "[placement][engine][topology]") {
  // Taking 2 of 8 NVSwitch GPUs shrinks the node's one island, but no pick could avoid that, so
  // it is not counted against the node: its 18-lane pair wins. (It was, and a PCIe-only T4 box
  // then outranked the NVSwitch H100.)
  Cluster c;
  c.upsert_node(h100_nvswitch("h100"));
  c.upsert_node(dgx1_v100("dgx1"));
  c.upsert_node(t4_node("t4"));
  const std::vector<std::string> names = {"h100", "dgx1", "t4"};
  const auto policy = gapless::placement::builtin_policy();
  const auto scores = prioritize(c, whole(2, gapless::model::TopologyWish::kNvlinkPreferred),
                                 policy.profiles[0], names);
  CHECK(scores[0] == 10);
  // The DGX-1's NVLink pair beats the T4's PCIe pair (by less than one 0..10 step here).
  const auto raw = gapless::placement::score_nodes(
      c, whole(2, gapless::model::TopologyWish::kNvlinkPreferred), policy.profiles[0], names);
  CHECK(raw[0] > raw[1]);
  CHECK(raw[1] > raw[2]);
}
