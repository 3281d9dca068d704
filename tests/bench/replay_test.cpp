// The experiment procedure of docs/packing-benchmark.md §3: tuning to 130 %, seeded arrivals,
// determinism, and a smoke run over the fixture trace.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <set>

#include "bench_policies.h"
#include "gapless/placement/strategy.h"
#include "replay.h"
#include "sweep.h"

using namespace gapless;
using namespace gapless::bench;
using gapless::bench::testing::kFixtures;

namespace {

Workload pods_of(const std::vector<int>& gpus_per_pod) {
  std::vector<TracePod> pods;
  for (std::size_t i = 0; i < gpus_per_pod.size(); ++i) {
    const int g = gpus_per_pod[i];
    std::string name = "p";
    name += std::to_string(100 + i);
    pods.push_back({name,
                    1000,
                    0,
                    g == 0 ? 0 : (g < 1000 ? 1 : g / 1000),
                    g == 0 ? 0 : (g < 1000 ? g : 1000),
                    {}});
  }
  return prepare_workload("t", pods);
}

std::int64_t total_request(const Workload& w, const Arrivals& a) {
  std::int64_t sum = 0;
  for (int i : a.order) sum += w.pods[i].gpu_request();
  return sum;
}

// The paper's baseline with its oracle mix (the static replay's form).
PolicySetup paper(const char* name) {
  PolicySetup p = testing::paper(name);
  p.oracle_mix = true;
  return p;
}

}  // namespace

TEST_CASE("tuning up appends resampled pods until the next would overshoot 130 %",
          "[bench][replay]") {
  const Workload w = pods_of({500, 1000, 2000, 0, 300});  // 3800 milli
  const std::int64_t cap = 10000;                         // target 13000
  const Arrivals a = make_arrivals(w, cap, 3, 42);
  REQUIRE(a.order.size() > w.pods.size());
  // The shuffled originals come first, each once.
  std::set<int> first(a.order.begin(), a.order.begin() + 5);
  CHECK(first == std::set<int>{0, 1, 2, 3, 4});
  // Stops at the first draw whose per-GPU milli would pass the target, so the total lies within
  // one GPU below it (or a multi-GPU pod's extra GPUs above it).
  const std::int64_t total = total_request(w, a);
  CHECK(total > 13000 - 1000);
  CHECK(total <= 13000 + 1000);
  CHECK(a.node_priority.size() == 3);
}

TEST_CASE("tuning down removes random pods until at most 130 %", "[bench][replay]") {
  const Workload w = pods_of(std::vector<int>(40, 1000));  // 40 GPUs asked of a 10-GPU cluster
  const Arrivals a = make_arrivals(w, 10000, 3, 7);
  CHECK(a.order.size() == 13);
  CHECK(total_request(w, a) == 13000);
  CHECK(std::set<int>(a.order.begin(), a.order.end()).size() == 13);  // no repeats
}

TEST_CASE("arrivals depend on the seed only", "[bench][replay]") {
  const Workload w = pods_of({500, 1000, 2000, 0, 300, 700, 4000});
  const Arrivals a = make_arrivals(w, 10000, 50, 42), b = make_arrivals(w, 10000, 50, 42);
  const Arrivals c = make_arrivals(w, 10000, 50, 43);
  CHECK(a.order == b.order);
  CHECK(a.node_priority == b.node_priority);
  CHECK((a.order != c.order || a.node_priority != c.node_priority));
  std::vector<int> sorted = a.node_priority;
  std::sort(sorted.begin(), sorted.end());
  for (int i = 0; i < 50; ++i) CHECK(sorted[i] == i);
}

TEST_CASE("smoke: every baseline replays the fixture trace, deterministically", "[bench][replay]") {
  SweepInput in;
  REQUIRE(load_inputs(kFixtures + "nodes.csv",
                      {kFixtures + "pods.csv", kFixtures + "pods_multigpu.csv"}, &in) == "");
  REQUIRE(in.nodes.size() == 24);
  REQUIRE(in.workloads.size() == 2);
  CHECK(in.workloads[0].name == "pods");
  const std::int64_t cap = gpu_capacity_milli(in.nodes);
  CHECK(cap == 102000);
  for (const char* name : {"random", "dotprod", "clustering", "packing", "bestfit", "fgd"}) {
    CAPTURE(name);
    for (const Workload& w : in.workloads) {
      const Arrivals a = make_arrivals(w, cap, in.nodes.size(), 42);
      const RunResult r = replay(in.nodes, w, a, paper(name), 42);
      REQUIRE(r.events.size() == a.order.size());
      CHECK(r.placed + r.failed == static_cast<int>(a.order.size()));
      CHECK(r.placed > 0);
      for (std::size_t i = 1; i < r.events.size(); ++i) {
        CHECK(r.events[i].arrived_milli >= r.events[i - 1].arrived_milli);
        CHECK(r.events[i].used_milli >= r.events[i - 1].used_milli);
      }
      CHECK(r.events.back().used_milli <= cap);
      CHECK(r.events.back().arrived_milli > cap);  // tuned to 130 %
      const RunResult again = replay(in.nodes, w, a, paper(name), 42);
      REQUIRE(again.events.size() == r.events.size());
      for (std::size_t i = 0; i < r.events.size(); ++i) {
        CHECK(again.events[i].used_milli == r.events[i].used_milli);
        CHECK(again.events[i].frag_milli == r.events[i].frag_milli);
      }
    }
  }
}

TEST_CASE("a sweep gives the same curves with one thread or two", "[bench][replay]") {
  SweepInput in;
  REQUIRE(load_inputs(kFixtures + "nodes.csv", {kFixtures + "pods.csv"}, &in) == "");
  in.policies = {paper("bestfit"), paper("fgd")};
  in.seeds = {42, 43};
  const std::vector<Cell> one = run_sweep(in, 1, {}), two = run_sweep(in, 2, {});
  REQUIRE(one.size() == 2);
  for (std::size_t c = 0; c < one.size(); ++c) {
    for (std::size_t s = 0; s < 2; ++s) {
      for (int b = 0; b < kBuckets; ++b) {
        const double x = one[c].curves[s].alloc[b], y = two[c].curves[s].alloc[b];
        CHECK(((std::isnan(x) && std::isnan(y)) || x == y));
      }
    }
  }
  CHECK(one[0].unallocated(50).n == 2);
}

TEST_CASE("random draws the GPU of a share anew for every pod, as it draws the node",
          "[bench][replay]") {
  // One node with two GPUs; three 300-milli shares, then two whole GPUs. If a share always took
  // the node's first GPU in a fixed order (the profile's draw of 0), the shares would share one
  // GPU in every seed and one whole pod would fit beside them: 1,900 milli in use. Drawn per
  // pod, the shares land on both GPUs in some seeds, and then no whole pod fits.
  const std::vector<model::Node> nodes = {to_node({"n0", 64000, 1 << 20, 2, "T4"})};
  const Workload w = pods_of({300, 300, 300, 1000, 1000});
  Arrivals a;
  a.order = {0, 1, 2, 3, 4};
  a.node_priority = {0};
  std::set<std::int64_t> used;
  for (std::uint64_t seed = 1; seed <= 10; ++seed) {
    const RunResult r = replay(nodes, w, a, paper("random"), seed);
    REQUIRE(r.events.size() == 5);
    used.insert(r.events.back().used_milli);
  }
  CHECK(used.count(1900) == 1);  // all three on one GPU in some seeds
  CHECK(used.count(900) == 1);   // spread over both in others
}
