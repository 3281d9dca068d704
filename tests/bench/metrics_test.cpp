// Bucketing to integer arrived % (§2.4), the seed summary, and the per-event metrics of a replay
// on a hand-computed three-node cluster.
#include <catch2/catch.hpp>

#include <cmath>

#include "bench_nodes.h"
#include "gapless/placement/strategy.h"
#include "metrics.h"
#include "replay.h"

using namespace gapless;
using namespace gapless::bench;

TEST_CASE("python-style rounding: half to even", "[bench][metrics]") {
  CHECK(round_half_even(1.5, 0) == 2);
  CHECK(round_half_even(2.5, 0) == 2);
  CHECK(round_half_even(99.5, 0) == 100);
  CHECK(round_half_even(0.125, 2) == Approx(0.12));
  CHECK(round_half_even(0.135, 2) == Approx(0.14));
  CHECK(round_half_even(12.3456, 2) == Approx(12.35));
}

TEST_CASE("events bucket by rounded arrived %, with neighbours filling gaps", "[bench][metrics]") {
  const std::int64_t cap = 100000;  // 1 % = 1000 milli
  std::vector<Event> ev = {
      {400, 100, 0},    // 0.4 % -> 0
      {600, 300, 0},    // 0.6 % -> 1
      {1500, 500, 0},   // 1.5 % -> 2 (half to even)
      {2500, 1500, 0},  // 2.5 % -> 2
      {4400, 2000, 0},  // 4.4 % -> 4; nothing rounds to 3
  };
  const Curve c = bucket(ev, cap);
  CHECK(c.alloc[0] == Approx(0.1));
  CHECK(c.alloc[1] == Approx(0.3));
  CHECK(c.alloc[2] == Approx(1.0));   // mean of 0.5 and 1.5
  CHECK(c.alloc[3] == Approx(1.33));  // (0.5 + 1.5 + 2.0) / 3 from buckets 2..4, 2 decimals
  CHECK(c.alloc[4] == Approx(2.0));
  CHECK(c.alloc[5] == Approx(2.0));  // from bucket 4
  CHECK(std::isnan(c.alloc[6]));
  CHECK(std::isnan(c.alloc[130]));
}

TEST_CASE("frag amount is % of capacity, frag ratio % of idle", "[bench][metrics]") {
  const Curve c = bucket({{100000, 60000, 8000}}, 100000);
  CHECK(c.alloc[100] == Approx(60));
  CHECK(c.frag_amount[100] == Approx(8));
  CHECK(c.frag_ratio[100] == Approx(20));  // 8000 of 40000 idle
}

TEST_CASE("seed summary: mean, sample sd, median, NaN skipped", "[bench][metrics]") {
  const Summary s = summarize({4.0, 5.0, 6.0, NAN, 9.0});
  CHECK(s.n == 4);
  CHECK(s.mean == Approx(6.0));
  CHECK(s.sd == Approx(std::sqrt((4.0 + 1.0 + 0.0 + 9.0) / 3)));
  CHECK(s.median == Approx(5.5));
  CHECK(summarize({}).n == 0);
  CHECK(summarize({3.0}).sd == 0);
}

TEST_CASE("a replay records allocation, arrival and fragmentation after every pod",
          "[bench][metrics]") {
  using testing::node_with;
  // a: 2 T4s, b: 1 T4, c: 1 V100; 16 cores each; 4000 milli of GPU.
  std::vector<model::Node> nodes = {node_with("a", 16000, 2, {}), node_with("b", 16000, 1, {}),
                                    node_with("c", 16000, 1, {}, 0, "V100")};
  std::vector<TracePod> pods = {
      {"p0", 4000, 0, 1, 600, {}},      // share 600
      {"p1", 4000, 0, 2, 1000, {}},     // two whole GPUs
      {"p2", 4000, 0, 1, 400, {"T4"}},  // a share on a T4 only
      {"p3", 20000, 0, 0, 0, {}},       // CPU-only, more CPU than any node has
  };
  const Workload w = prepare_workload("tiny", pods);
  REQUIRE(w.oracle.entries.size() == 4);  // every shape once: weight 1/4 each
  Arrivals a;
  a.order = {0, 1, 2, 3};
  a.node_priority = {0, 1, 2};
  PolicySetup bestfit;
  bestfit.label = "bestfit";
  bestfit.profile.node = {{placement::find_strategy("bestfit"), 1.0}};
  bestfit.profile.gpu = {{placement::find_strategy("bestfit"), 1.0}};
  bestfit.profile.gpu_weight = 0;
  bestfit.profile.topology_weight = 0;
  const RunResult r = replay(nodes, w, a, bestfit, 42);
  REQUIRE(r.events.size() == 4);
  CHECK(r.placed == 3);
  CHECK(r.failed == 1);
  // p0: bestfit scores a 86, b and c 92; b wins the tie by node order. F: a 0.25*2000 (only the
  // CPU-only shape), b 0.25*(400+400+0+400), c 0.25*(0+1000+1000+1000).
  CHECK(r.events[0].arrived_milli == 600);
  CHECK(r.events[0].used_milli == 600);
  CHECK(r.events[0].frag_milli == Approx(500 + 300 + 750));
  // p1 takes both GPUs of a.
  CHECK(r.events[1].arrived_milli == 2600);
  CHECK(r.events[1].used_milli == 2600);
  CHECK(r.events[1].frag_milli == Approx(300 + 750));
  // p2 fills b's last 400.
  CHECK(r.events[2].used_milli == 3000);
  CHECK(r.events[2].frag_milli == Approx(750));
  // p3 fits nowhere: dropped, arrival unchanged (it asks no GPU), nothing else moves.
  CHECK(r.events[3].arrived_milli == 3000);
  CHECK(r.events[3].used_milli == 3000);
  const Curve c = bucket(r.events, 4000);
  CHECK(c.alloc[75] == Approx(75));       // 3000 of 4000 arrived and allocated
  CHECK(c.frag_ratio[75] == Approx(75));  // 750 of 1000 idle
}
