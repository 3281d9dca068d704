// The limit (bench/limit.h): the LP's bound is never beaten, by a brute-force optimum on small
// instances or by any policy on the fixture traces; the offline packing is a real placement that
// never beats the bound; odd input does not crash.
#include <catch2/catch.hpp>

#include <algorithm>
#include <random>

#include "bench_policies.h"
#include "limit.h"
#include "limit_report.h"
#include "lp_bound.h"
#include "offline_pack.h"
#include "random_limit.h"
#include "replay.h"
#include "sweep.h"

using namespace gapless;
using namespace gapless::bench;
using gapless::bench::testing::kFixtures;
using gapless::bench::testing::limit_pod;

namespace {

std::vector<model::Node> cluster(const std::vector<TraceNode>& trace_nodes) {
  std::vector<model::Node> nodes;
  for (const TraceNode& t : trace_nodes) nodes.push_back(to_node(t));
  std::sort(nodes.begin(), nodes.end(), [](auto& a, auto& b) { return a.name < b.name; });
  return nodes;
}

// The most GPU milli any placement of the pods reaches, by trying every one: each pod dropped,
// or a share on any GPU of any node, or whole GPUs on any node (its lowest idle ones: idle GPUs
// are interchangeable).
class BruteForce {
 public:
  BruteForce(const std::vector<model::Node>& nodes, const Workload& w) : nodes_(nodes), w_(w) {
    for (const model::Node& n : nodes) {
      gpu_.emplace_back(n.gpus.size(), 0);
      cpu_.push_back(0);
      memory_.push_back(0);
    }
  }
  std::int64_t best() {
    search(0, 0);
    return best_;
  }

 private:
  static constexpr int kWhole = -1;  // gpu_ value of a GPU held whole

  bool host_fits(std::size_t n, const model::GpuRequest& r) const {
    const model::Node& node = nodes_[n];
    if (cpu_[n] + r.host.cpu_milli > node.host.cpu_milli) return false;
    if (memory_[n] + r.host.memory_mib > node.host.memory_mib) return false;
    return r.models.empty() ||
           std::find(r.models.begin(), r.models.end(), node.gpus.front().model) != r.models.end();
  }
  void take_host(std::size_t n, const model::GpuRequest& r, int sign) {
    cpu_[n] += sign * r.host.cpu_milli;
    memory_[n] += sign * r.host.memory_mib;
  }
  void search(std::size_t i, std::int64_t milli) {
    best_ = std::max(best_, milli);
    if (i == w_.requests.size()) return;
    search(i + 1, milli);  // dropped
    const model::GpuRequest& r = w_.requests[i];
    for (std::size_t n = 0; n < nodes_.size(); ++n) {
      if (nodes_[n].gpus.empty() || !host_fits(n, r)) continue;
      take_host(n, r, 1);
      if (r.kind == model::RequestKind::kShared) try_shares(i, n, milli);
      if (r.kind == model::RequestKind::kWhole) try_whole(i, n, milli);
      take_host(n, r, -1);
    }
  }
  void try_shares(std::size_t i, std::size_t n, std::int64_t milli) {
    const int q = w_.requests[i].shared.compute_milli;
    for (int& used : gpu_[n]) {
      if (used == kWhole || used + q > 1000) continue;
      used += q;
      search(i + 1, milli + q);
      used -= q;
    }
  }
  void try_whole(std::size_t i, std::size_t n, std::int64_t milli) {
    std::vector<int*> idle;
    for (int& used : gpu_[n])
      if (used == 0) idle.push_back(&used);
    const int k = w_.requests[i].whole;
    if (static_cast<int>(idle.size()) < k) return;
    for (int j = 0; j < k; ++j) *idle[j] = kWhole;
    search(i + 1, milli + 1000LL * k);
    for (int j = 0; j < k; ++j) *idle[j] = 0;
  }

  const std::vector<model::Node>& nodes_;
  const Workload& w_;
  std::vector<std::vector<int>> gpu_;
  std::vector<std::int64_t> cpu_, memory_;
  std::int64_t best_ = 0;
};

struct Solved {
  LpBound lp;
  OfflinePacking offline;
  std::int64_t optimum = 0;
};

Solved solve_all(const std::vector<TraceNode>& trace_nodes, const std::vector<TracePod>& pods) {
  const std::vector<model::Node> nodes = cluster(trace_nodes);
  const Workload w = prepare_workload("t", pods);
  std::vector<int> all(w.pods.size());
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int>(i);
  const LimitInstance in = make_limit_instance(nodes, w, all);
  Solved s;
  s.lp = solve_lp_bound(in);
  s.offline = offline_pack(nodes, w, in, s.lp);
  s.optimum = BruteForce(nodes, w).best();
  return s;
}

}  // namespace

TEST_CASE("the bound packs shares per GPU exactly", "[bench][limit]") {
  const std::vector<TraceNode> one_node = {{"n0", 64000, 1 << 20, 2, "T4"}};
  SECTION("three 600-milli shares: only two GPUs' worth fit, one each") {
    const Solved s = solve_all(one_node, {limit_pod(1, 600), limit_pod(1, 600), limit_pod(1, 600)});
    CHECK(s.optimum == 1200);
    CHECK(s.lp.allocated_milli == Approx(1200));
    CHECK(s.offline.allocated_milli == 1200);
  }
  SECTION("600 + 400 twice fills both GPUs") {
    const Solved s = solve_all(
        one_node, {limit_pod(1, 600), limit_pod(1, 600), limit_pod(1, 400), limit_pod(1, 400)});
    CHECK(s.optimum == 2000);
    CHECK(s.lp.allocated_milli == Approx(2000));
    CHECK(s.offline.allocated_milli == 2000);
  }
  SECTION("sizes off the 10-milli grid: three 333s on one GPU") {
    const Solved s = solve_all({{"n0", 64000, 1 << 20, 1, "T4"}},
                               {limit_pod(1, 333), limit_pod(1, 333), limit_pod(1, 333)});
    CHECK(s.optimum == 999);
    CHECK(s.lp.allocated_milli == Approx(999));
  }
  SECTION("a share and whole GPUs compete for the GPUs") {
    const Solved s = solve_all(one_node, {limit_pod(2, 1000), limit_pod(1, 300)});
    CHECK(s.optimum == 2000);
    CHECK(s.lp.allocated_milli == Approx(2000));
  }
  SECTION("models, GPU count and CPU rule nodes out") {
    const std::vector<TraceNode> small = {{"n0", 4000, 1 << 20, 1, "T4"}};
    const Solved s =
        solve_all(small, {limit_pod(1, 500, 1000, {"A100"}), limit_pod(2, 1000),
                          limit_pod(1, 1000, 8000), limit_pod(1, 200, 1000, {"T4", "A100"})});
    CHECK(s.optimum == 200);
    CHECK(s.lp.allocated_milli == Approx(200));
  }
}

TEST_CASE(
    "on random small instances the bound is never below the optimum, and the offline "
    "packing never above it",
    "[bench][limit]") {
  testing::RandomLimit random(7, {});
  int exact = 0;
  for (int round = 0; round < 60; ++round) {
    const std::vector<TraceNode> nodes = random.nodes();
    const std::vector<TracePod> pods = random.pods();
    const Solved s = solve_all(nodes, pods);
    INFO("round " << round << ": optimum " << s.optimum << ", LP " << s.lp.allocated_milli
                  << ", offline " << s.offline.allocated_milli);
    REQUIRE(s.lp.error.empty());
    REQUIRE(s.offline.error.empty());
    CHECK(s.lp.allocated_milli >= static_cast<double>(s.optimum) - 1e-6);
    CHECK(s.offline.allocated_milli <= s.optimum);
    exact += std::abs(s.lp.allocated_milli - static_cast<double>(s.optimum)) < 1e-6 ? 1 : 0;
  }
  // The relaxation is tight on most of these (it relaxes only how pods split across the nodes
  // of a type): a bound that ignored the per-GPU packing would rarely be.
  CHECK(exact >= 30);
}

TEST_CASE("the bound is never above any policy's unallocated GPU on the fixture traces",
          "[bench][limit]") {
  SweepInput in;
  REQUIRE(load_inputs(kFixtures + "nodes.csv",
                      {kFixtures + "pods.csv", kFixtures + "pods_multigpu.csv"}, &in) == "");
  const std::int64_t capacity = gpu_capacity_milli(in.nodes);
  const std::vector<PolicySetup> policies = {testing::paper("bestfit"), testing::paper("fgd"),
                                             testing::paper("random"), testing::shipped_policy()};
  for (const Workload& w : in.workloads) {
    for (std::uint64_t seed : {42, 43, 44}) {
      const Arrivals a = make_arrivals(w, capacity, in.nodes.size(), seed);
      const Limit limit = compute_limit(in.nodes, w, a);
      INFO(w.name << " seed " << seed << ": bound " << limit.bound_pct << ", offline "
                  << limit.offline_pct);
      REQUIRE(limit.error.empty());
      CHECK(limit.bound_pct <= limit.offline_pct + 1e-9);
      // At the same point of the arrivals, no policy allocated more than the bound allows.
      const std::size_t at_full = arrived_at_full(w, a, capacity).size();
      REQUIRE(at_full > 0);
      for (const PolicySetup& p : policies) {
        const RunResult r = replay(in.nodes, w, a, p, seed);
        const double pct =
            unallocated_pct(static_cast<double>(r.events[at_full - 1].used_milli), capacity);
        INFO(p.label << ": " << pct);
        CHECK(limit.bound_pct <= pct + 1e-9);
      }
    }
  }
}

TEST_CASE("the limit of empty or odd input is computed without a crash", "[bench][limit]") {
  const std::vector<model::Node> nodes = cluster({{"n0", 8000, 8192, 2, "T4"}});
  SECTION("no pods") {
    const Workload w = prepare_workload("t", {});
    const Limit l = compute_limit(nodes, w, Arrivals{});
    CHECK(l.error.empty());
    CHECK(l.bound_pct == Approx(100));
    CHECK(l.offline_pct == Approx(100));
  }
  SECTION("CPU-only pods and indices out of range") {
    const Workload w = prepare_workload("t", {limit_pod(0, 0, 2000), limit_pod(1, 0, 1000)});
    Arrivals a;
    a.order = {-1, 0, 7, 1, 1};
    const Limit l = compute_limit(nodes, w, a);
    CHECK(l.error.empty());
    CHECK(l.bound_pct == Approx(100));
  }
  SECTION("nodes without GPUs") {
    const std::vector<model::Node> cpu_nodes = cluster({{"c0", 8000, 8192, 0, ""}});
    const Workload w = prepare_workload("t", {limit_pod(1, 500)});
    Arrivals a;
    a.order = {0};
    const Limit l = compute_limit(cpu_nodes, w, a);
    CHECK(l.error.empty());
  }
}

TEST_CASE("the limit's JSON lines read like a policy's", "[bench][limit]") {
  LimitCell c{"default", {42, 43}, {}};
  c.limits.push_back({3.0, 3.2, 0.5, "lp-plan", 10, 5, ""});
  c.limits.push_back({3.2, 3.4, 0.7, "lp-plan", 12, 6, ""});
  const std::string lines = limit_json_lines(c);
  CHECK(lines.find("\"policy\":\"lp-bound\"") != std::string::npos);
  CHECK(lines.find("\"policy\":\"offline\"") != std::string::npos);
  CHECK(lines.find("\"unallocated_mean\":3.100") != std::string::npos);
  CHECK(lines.find("\"unallocated_max\":3.400") != std::string::npos);
  CHECK(lines.find("\"lp_columns\":12") != std::string::npos);
  CHECK(lines.find("\"methods\":{\"lp-plan\":2}") != std::string::npos);
  CHECK(lines.find("error") == std::string::npos);
}
