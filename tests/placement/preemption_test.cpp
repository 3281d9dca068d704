// PostFilter with GPUs in view (placement::select_victims): which lower-priority pods to evict
// on one node. Expected victim sets are written out per case, highest priority first.
#include <catch2/catch.hpp>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "gapless/placement/fit.h"
#include "gapless/placement/preemption.h"
#include "test_nodes.h"

namespace {

using namespace gapless::testnodes;
using gapless::model::Allocation;
using gapless::model::Cluster;
using gapless::model::GpuRequest;
using gapless::model::Node;
using gapless::model::RequestKind;
using gapless::model::TopologyWish;
using gapless::placement::ProposedVictim;
using gapless::placement::select_victims;
using gapless::placement::victim_gpu_milli;
using gapless::placement::VictimChoice;

using Victims = std::vector<std::string>;
const Victims kNone = {"<no set>"};

// A pod already on the node: whole GPUs, shares (index, MiB, milli) or MIG (gpu, profile, start).
struct Holder {
  std::string uid;
  int priority = 0;
  std::vector<int> whole;
  std::vector<std::tuple<int, std::int64_t, int>> shares;
  std::vector<std::tuple<int, std::string, int>> mig;
};

Holder W(const std::string& uid, int priority, std::vector<int> gpus) {
  return {uid, priority, std::move(gpus), {}, {}};
}
Holder S(const std::string& uid, int priority, int gpu, std::int64_t mib, int milli) {
  return {uid, priority, {}, {{gpu, mib, milli}}, {}};
}
Holder M(const std::string& uid, int priority, int gpu, const std::string& profile, int start) {
  return {uid, priority, {}, {}, {{gpu, profile, start}}};
}

Allocation allocation_of(const Holder& h, const std::string& node) {
  Allocation a;
  a.pod_uid = h.uid;
  a.pod_name = h.uid;
  a.pod_ns = "default";
  a.node = node;
  a.priority = h.priority;
  for (int i : h.whole) a.gpus.push_back({i, "", 0, 0, 0});
  for (const auto& [i, mib, milli] : h.shares) a.gpus.push_back({i, "", mib, milli, 0});
  for (const auto& [gpu, profile, start] : h.mig) a.mig.push_back({gpu, profile, start});
  return a;
}

Cluster cluster_with(const Node& node, const std::vector<Holder>& holders) {
  Cluster c;
  c.upsert_node(node);
  for (const Holder& h : holders) {
    auto s = c.commit(allocation_of(h, node.name));
    INFO(h.uid << ": " << (s ? "" : s.error()));
    REQUIRE(s);
  }
  return c;
}

std::optional<VictimChoice> choose(const Cluster& c, const std::string& node, const GpuRequest& req,
                                   int priority, const std::vector<ProposedVictim>& proposed = {}) {
  return select_victims(*c.find_node(node), c.allocations(), req, priority, proposed);
}

Victims victims_of(const Cluster& c, const std::string& node, const GpuRequest& req, int priority,
                   const std::vector<ProposedVictim>& proposed = {}) {
  auto r = choose(c, node, req, priority, proposed);
  return r ? r->victims : kNone;
}

GpuRequest gpus(int k, TopologyWish t = TopologyWish::kNvlinkRequired) {
  GpuRequest r;
  r.kind = RequestKind::kWhole;
  r.whole = k;
  r.topology = t;
  return r;
}

// One whole-GPU pod per GPU, p<i> on GPU i with priorities[i]; a negative priority: GPU free.
std::vector<Holder> one_per_gpu(const std::vector<int>& priorities) {
  std::vector<Holder> out;
  for (std::size_t i = 0; i < priorities.size(); ++i) {
    if (priorities[i] >= 0) out.push_back(W("p" + std::to_string(i), priorities[i], {int(i)}));
  }
  return out;
}

struct Case {
  Case(const char* name, Node node, std::vector<Holder> holders, GpuRequest req, int priority,
       Victims expected, std::vector<ProposedVictim> proposed = {})
      : name(name),
        node(std::move(node)),
        holders(std::move(holders)),
        req(std::move(req)),
        priority(priority),
        expected(std::move(expected)),
        proposed(std::move(proposed)) {}
  const char* name;
  Node node;
  std::vector<Holder> holders;
  GpuRequest req;
  int priority;
  Victims expected;
  std::vector<ProposedVictim> proposed;
};

void run(const std::vector<Case>& cases) {
  for (const Case& t : cases) {
    SECTION(t.name) {
      const Cluster c = cluster_with(t.node, t.holders);
      CHECK(victims_of(c, t.node.name, t.req, t.priority, t.proposed) == t.expected);
    }
  }
}

}  // namespace

TEST_CASE("victims on a DGX-1 (hybrid cube-mesh) free an NVLink set", "[placement][preemption]") {
  // NVLink: inside each quad {0..3} {4..7}, and i <-> i+4.
  const Node n = dgx1_v100("dgx1");
  run({
      {"2 linked GPUs: the two lowest priorities on an NVLink pair",
       n,
       one_per_gpu({10, 10, 10, 10, 5, 50, 50, 50}),
       gpus(2),
       100,
       {"p0", "p4"}},
      {"4 GPUs: one pod holding a quad beats two of lower priority",
       n,
       {W("q1", 10, {0, 1}), W("q2", 10, {2, 3}), W("r", 20, {4, 5, 6, 7})},
       gpus(4),
       100,
       {"r"}},
      {"a free GPU: evict an NVLink neighbour of it (7: 3, 4, 5, 6)",
       n,
       one_per_gpu({1, 1, 1, 30, 20, 20, 20, -1}),
       gpus(2),
       100,
       {"p4"}},
      {"a free GPU, NVLink only preferred: the lowest priority anywhere",
       n,
       one_per_gpu({1, 1, 1, 30, 20, 20, 20, -1}),
       gpus(2, TopologyWish::kNvlinkPreferred),
       100,
       {"p0"}},
      {"equal or higher priority is never a victim: no set", n,
       one_per_gpu({10, 10, 10, 10, 5, 50, 50, 50}), gpus(2), 10, kNone},
      {"no NVLink pair among lower-priority pods: no set", n,
       one_per_gpu({1, 50, 50, 50, 50, 1, 50, 50}), gpus(2), 10, kNone},
      {"kube-scheduler's proposal wins a tie",
       n,
       one_per_gpu({1, 1, 1, 30, 20, 20, 20, -1}),
       gpus(2),
       100,
       {"p6"},
       {{"p6", std::nullopt}}},
      {"kube-scheduler's proposal beats a lower priority (it may be PDB-free)",
       n,
       one_per_gpu({1, 1, 1, 30, 20, 20, 20, -1}),
       gpus(2),
       100,
       {"p3"},
       {{"p3", std::nullopt}}},
  });
}

TEST_CASE("victims on an HGX H100 (NVSwitch): fewest pods, lowest priority, least GPU work",
          "[placement][preemption]") {
  const Node n = h100_nvswitch("hgx");
  const std::vector<Holder> four = {W("a", 1, {0, 1, 2, 3}), W("b", 2, {4, 5}), W("c", 3, {6}),
                                    W("d", 3, {7})};
  const std::vector<Holder> same_priority = {W("a", 2, {0, 1, 2, 3}), W("b", 2, {4, 5}),
                                             W("c", 3, {6}), W("d", 3, {7})};
  const std::vector<Holder> low_singles = {W("a", 50, {0, 1, 2, 3}), W("b", 50, {4, 5}),
                                           W("c", 0, {6}), W("d", 0, {7})};
  run({
      {"lowest priority, though it holds more GPUs", n, four, gpus(2), 100, {"a"}},
      {"same priority: the least GPU work lost", n, same_priority, gpus(2), 100, {"b"}},
      {"one pod beats two of lower priority", n, low_singles, gpus(2), 100, {"b"}},
      {"the whole node: everyone, highest priority first",
       n,
       low_singles,
       gpus(8),
       100,
       {"a", "b", "c", "d"}},
      {"only pods below 3 may go", n, four, gpus(7), 3, kNone},
  });
}

TEST_CASE("victims for shares free vRAM and compute on one GPU", "[placement][preemption]") {
  // T4s, 15360 MiB each. GPU 0: s1 8000 MiB/500, s2 4000 MiB/200; GPU 1: s3 12000 MiB/300;
  // GPUs 2 and 3 held whole by w, above the preemptor.
  const Node n = t4_node("t4", 4);
  const std::vector<Holder> pods = {S("s1", 1, 0, 8000, 500), S("s2", 1, 0, 4000, 200),
                                    S("s3", 5, 1, 12000, 300), W("w", 200, {2, 3})};
  run({
      {"6000 MiB, 400 milli: the share losing least work (s2 holds 260 milli of vRAM)",
       n,
       pods,
       shared(6000, 400),
       100,
       {"s2"}},
      {"12000 MiB: one pod on GPU 1 beats two on GPU 0", n, pods, shared(12000, 0), 100, {"s3"}},
      {"2 GPUs of 10000 MiB: s1 makes room on GPU 0 (s2 alone would not), s3 on GPU 1",
       n,
       pods,
       shared(10000, 0, 2),
       100,
       {"s3", "s1"}},
      {"a whole GPU the shares block: empty GPU 1",
       n,
       pods,
       gpus(1, TopologyWish::kNone),
       100,
       {"s3"}},
      {"priority 3 may evict only s1 and s2", n, pods, shared(12000, 0), 3, {"s1", "s2"}},
      {"priority 1 may evict no one", n, pods, shared(12000, 0), 1, kNone},
  });
}

TEST_CASE("victims for MIG free a slot the profile can start at", "[placement][preemption]") {
  // A100-80GB, reconfigurable: 3g.40gb at 0 (m1) and at 4 (m2). 4g.40gb starts only at 0.
  const Node n = a100_80_mig("a100", 1);
  const std::vector<Holder> pods = {M("m1", 5, 0, "3g.40gb", 0), M("m2", 1, 0, "3g.40gb", 4)};
  run({
      {"4g.40gb needs slices 0-3: m1, though m2 has the lower priority",
       n,
       pods,
       mig("4g.40gb"),
       100,
       {"m1"}},
      {"1g.10gb fits either half: the lower priority", n, pods, mig("1g.10gb"), 100, {"m2"}},
      {"7g.80gb: both", n, pods, mig("7g.80gb"), 100, {"m1", "m2"}},
      {"m1 is not below 5: 4g.40gb has no slot", n, pods, mig("4g.40gb"), 5, kNone},
  });
}

TEST_CASE("kube-scheduler's own victims: kept when not Gapless's to judge",
          "[placement][preemption]") {
  const Node n = h100_nvswitch("hgx");
  const Cluster c = cluster_with(n, {W("a", 1, {0, 1, 2, 3}), W("b", 2, {4, 5}), W("c", 3, {6})});
  // "sidecar" holds no GPU (kube-scheduler evicts it for CPU): kept, its priority unknown so
  // taken as 99 (first). "b" is proposed: chosen over the lower "a". "vip" is not below 100.
  auto r = choose(c, "hgx", gpus(3), 100,
                  {{"sidecar", std::nullopt}, {"b", std::nullopt}, {"vip", 500}});
  REQUIRE(r);
  CHECK(r->victims == Victims{"sidecar", "b"});
  CHECK(r->unproposed == 0);
  CHECK(r->gpu_milli == 2000);

  // GPUs that fit as they are (GPU 7 is free): kube-scheduler evicts for its own reasons.
  CHECK(victims_of(c, "hgx", gpus(1), 100, {{"x", 7}, {"c", std::nullopt}}) == Victims{"x", "c"});
  CHECK(victims_of(c, "hgx", gpus(1), 100).empty());

  // A victim outside the proposal is counted (a possible PDB violation).
  r = choose(c, "hgx", gpus(2), 100, {{"c", std::nullopt}});
  REQUIRE(r);
  CHECK(r->victims == Victims{"c"});
  CHECK(r->unproposed == 0);
  r = choose(c, "hgx", gpus(4), 100, {{"c", std::nullopt}});
  REQUIRE(r);
  CHECK(r->victims == Victims{"a"});
  CHECK(r->unproposed == 1);
}

TEST_CASE("victim choice is deterministic", "[placement][preemption]") {
  std::vector<Holder> pods = one_per_gpu({1, 1, 1, 30, 20, 20, 20, -1});
  const Cluster forward = cluster_with(dgx1_v100("dgx1"), pods);
  std::reverse(pods.begin(), pods.end());
  const Cluster backward = cluster_with(dgx1_v100("dgx1"), pods);
  const Victims first = victims_of(forward, "dgx1", gpus(2), 100);
  CHECK(first == Victims{"p4"});
  for (int i = 0; i < 3; ++i) {
    CHECK(victims_of(forward, "dgx1", gpus(2), 100) == first);
    CHECK(victims_of(backward, "dgx1", gpus(2), 100) == first);
  }
}

TEST_CASE("past the search bound, a greedy set from which no pod can be spared",
          "[placement][preemption]") {
  // 80 shares of 8000 MiB on an 8-GPU H100; 40000 MiB on one GPU needs 5 of them gone:
  // C(80, 3) alone is past kMaxVictimSetsTried.
  const Node n = h100_nvswitch("hgx");
  std::vector<Holder> pods;
  for (int i = 0; i < 80; ++i) {
    pods.push_back(S("s" + std::to_string(100 + i), i % 7, i % 8, 8000, 100));
  }
  const Cluster c = cluster_with(n, pods);
  const GpuRequest req = shared(40000, 0);
  auto r = choose(c, "hgx", req, 6);  // priority-6 shares stay
  REQUIRE(r);
  CHECK_FALSE(r->exhaustive);
  CHECK(r->victims.size() == 5);
  auto fits_without = [&](const Victims& gone) {
    Node after = *c.find_node("hgx");
    for (const std::string& uid : gone) unapply_allocation(after, *c.allocation(uid));
    return gapless::placement::quick_fit(after, req).code == gapless::placement::FitCode::kFits;
  };
  CHECK(fits_without(r->victims));
  for (std::size_t i = 0; i < r->victims.size(); ++i) {
    Victims spared = r->victims;
    spared.erase(spared.begin() + static_cast<std::ptrdiff_t>(i));
    CHECK_FALSE(fits_without(spared));
    CHECK(c.allocation(r->victims[i])->priority < 6);
  }
  CHECK(choose(c, "hgx", req, 6)->victims == r->victims);
}

TEST_CASE("GPU work lost, in GPU-milli", "[placement][preemption]") {
  const Node t4 = t4_node("t4", 2);
  CHECK(victim_gpu_milli(t4, allocation_of(W("w", 0, {0, 1}), "t4")) == 2000);
  // The larger of compute and vRAM fraction: 7680 MiB of 15360 is 500.
  CHECK(victim_gpu_milli(t4, allocation_of(S("s", 0, 0, 7680, 100), "t4")) == 500);
  CHECK(victim_gpu_milli(t4, allocation_of(S("s", 0, 0, 1536, 300), "t4")) == 300);
  const Node a100 = a100_80_mig("a100", 1);
  CHECK(victim_gpu_milli(a100, allocation_of(M("m", 0, 0, "3g.40gb", 0), "a100")) == 428);
}

namespace {

using gapless::placement::DisruptionBudget;
using gapless::placement::pdb_violations;

// Victims, and how many of them violate a budget, for a pod of priority 100.
std::pair<Victims, int> with_budgets(const Node& node, const std::vector<Holder>& holders,
                                     const GpuRequest& req,
                                     const std::vector<DisruptionBudget>& budgets) {
  const Cluster c = cluster_with(node, holders);
  auto r = select_victims(*c.find_node(node.name), c.allocations(), req, 100, {}, budgets);
  if (!r) return {kNone, -1};
  return {r->victims, r->pdb_violations};
}

}  // namespace

TEST_CASE("PodDisruptionBudgets: victims that violate one are taken last",
          "[placement][preemption][pdb]") {
  const Node n = h100_nvswitch("hgx");
  // Four pods of 2 GPUs fill the node.
  const std::vector<Holder> pairs = {W("a", 1, {0, 1}), W("b", 1, {2, 3}), W("c", 2, {4, 5}),
                                     W("d", 3, {6, 7})};
  struct PdbCase {
    const char* name;
    std::vector<Holder> holders;
    GpuRequest req;
    std::vector<DisruptionBudget> budgets;
    Victims expected;
    int violations;
  };
  const std::vector<Holder> spread = {W("a", 1, {0, 1}), W("b", 1, {2}), W("c", 1, {3}),
                                      W("d", 1, {4, 5}), W("e", 1, {6, 7})};
  const PdbCase cases[] = {
      {"no budgets: lowest priority", pairs, gpus(2), {}, {"a"}, 0},
      {"a and b protected: a higher-priority pod goes instead",
       pairs,
       gpus(2),
       {{"ml/ab", {"a", "b"}, 0}},
       {"c"},
       0},
      {"one disruption allowed: a may go", pairs, gpus(2), {{"ml/ab", {"a", "b"}, 1}}, {"a"}, 0},
      {"everyone protected: the smallest set, its violation counted",
       pairs,
       gpus(2),
       {{"ml/all", {"a", "b", "c", "d"}, 0}},
       {"a"},
       1},
      {"two pods, one allowed: the pair that violates nothing",
       pairs,
       gpus(4),
       {{"ml/ab", {"a", "b"}, 1}},
       {"c", "a"},
       0},
      {"fewer violations beat fewer pods",
       spread,
       gpus(2),
       {{"ml/big", {"a", "d", "e"}, 0}},
       {"b", "c"},
       0},
      // a stays within ml/a but not ml/ab: every pair violates twice, so priority decides.
      {"a pod in two budgets violates if either runs out",
       pairs,
       gpus(4),
       {{"ml/a", {"a"}, 1}, {"ml/ab", {"a", "b"}, 0}, {"ml/cd", {"c", "d"}, 0}},
       {"a", "b"},
       2},
  };
  for (const PdbCase& t : cases) {
    INFO(t.name);
    const auto [victims, violations] = with_budgets(n, t.holders, t.req, t.budgets);
    CHECK(victims == t.expected);
    CHECK(violations == t.violations);
  }
}

TEST_CASE("PDB violations are counted most important victim first, as kube-scheduler does",
          "[placement][preemption][pdb]") {
  const std::vector<DisruptionBudget> one_allowed = {{"ns/web", {"x", "y", "z"}, 1}};
  // x (priority 5) takes the one disruption; y and z violate.
  CHECK(pdb_violations({{1, "y"}, {5, "x"}, {1, "z"}}, one_allowed) == 2);
  CHECK(pdb_violations({{1, "y"}}, one_allowed) == 0);
  CHECK(pdb_violations({{1, "other"}}, {{"ns/none", {}, 0}}) == 0);
  CHECK(pdb_violations({{1, "y"}, {1, "x"}}, {{"ns/neg", {"x"}, -1}}) == 1);  // already short
}
