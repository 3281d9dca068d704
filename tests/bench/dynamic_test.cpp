// The dynamic replay (bench/replay.h): arrivals in creation order, departures after each pod's
// lifetime, a FIFO pending queue retried when capacity frees, and the pending times measured.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "bench_nodes.h"
#include "bench_policies.h"
#include "gapless/placement/strategy.h"
#include "replay.h"
#include "report.h"
#include "sweep.h"

using namespace gapless;
using namespace gapless::bench;
using namespace gapless::bench::testing;

namespace {

// Two nodes of one GPU each: every GPU pod takes a whole node.
std::vector<model::Node> two_single_gpu_nodes() {
  return {to_node({"a", 64000, 1 << 20, 1, "T4"}), to_node({"b", 64000, 1 << 20, 1, "T4"})};
}

// The options that also compute the least wait of the longest-waiting multi-GPU pod.
DynamicOptions least_waits() {
  DynamicOptions opt;
  opt.least_waits = true;
  return opt;
}

}  // namespace

TEST_CASE("dynamic: arrivals, departures and pending times on a two-node cluster",
          "[bench][dynamic]") {
  const std::vector<model::Node> nodes = two_single_gpu_nodes();
  // p1 and p2 take both GPUs. p3 waits for p2 (leaves at 50). p4 waits for p3 (leaves at 60).
  // p5 arrives at 60, when p3 leaves: the departure comes first, then the waiting p4 takes the
  // GPU, then p5 arrives and waits for p4 (leaves at 65).
  const Workload w =
      prepare_workload("micro", {timed("p1", 1, 1000, 0, 100), timed("p2", 1, 1000, 10, 40),
                                 timed("p3", 1, 1000, 20, 10), timed("p4", 1, 1000, 55, 5),
                                 timed("p5", 1, 1000, 60, 1)});
  const Arrivals a = make_dynamic_arrivals(w, nodes.size(), 42);
  DynamicOptions opt;
  opt.curve_points = 7;  // t = 0, 10, ..., 60
  opt.curve_span = 1;
  const DynamicRun r = replay_dynamic(nodes, w, a, paper("bestfit"), 42, opt);

  CHECK(start_of(w, a, r, "p1") == 0);
  CHECK(start_of(w, a, r, "p2") == 10);
  CHECK(start_of(w, a, r, "p3") == 50);
  CHECK(start_of(w, a, r, "p4") == 60);
  CHECK(start_of(w, a, r, "p5") == 65);
  CHECK(r.arrived == 5);
  CHECK(r.started == 5);
  CHECK(r.never_placed == 0);
  // Pending times 0, 0, 30, 5, 5.
  CHECK(r.pending_mean == Approx(8.0));
  CHECK(r.pending_p50 == Approx(5.0));
  CHECK(r.pending_p99 == Approx(5.0 + 0.96 * 25.0));  // between the 4th and 5th of 5
  CHECK(r.pending_max == 30);
  CHECK(r.waited_pct == Approx(60.0));
  // [0,10): 1 of 2 GPUs; [10,60]: both. Over [0, 60]: (10 * 50 + 50 * 100) / 60.
  CHECK(r.horizon == 60);
  CHECK(r.alloc_mean == Approx((10 * 50.0 + 50 * 100.0) / 60));
  CHECK(r.alloc_peak == 100);
  // Pods wait during [20,50), [55,60) and [60,65), with both GPUs taken.
  CHECK(r.contended_s == Approx(40.0));
  CHECK(r.alloc_contended == Approx(100.0));
  CHECK(r.alloc_curve == std::vector<double>{50, 100, 100, 100, 100, 100, 100});
  CHECK(r.waiting_curve == std::vector<double>{0, 0, 1, 1, 1, 0, 1});

  opt.curve_span = 2;  // t = 0, 20, ..., 120: past the last arrival, p5 starts and all leave
  const DynamicRun longer = replay_dynamic(nodes, w, a, paper("bestfit"), 42, opt);
  CHECK(longer.alloc_curve == std::vector<double>{50, 100, 100, 100, 50, 0, 0});
  CHECK(longer.waiting_curve == std::vector<double>{0, 1, 1, 1, 0, 0, 0});
  const std::string csv = dynamic_curve_csv({"micro", "bestfit", {42}, {longer}, ""}, opt);
  CHECK(
      csv.starts_with("time_s,time_pct,alloc_mean,alloc_sd,waiting_mean,waiting_sd\n"
                      "0.0,0.00,50.000,0.000,0.00,0.00\n"
                      "20.0,33.33,100.000,0.000,1.00,0.00\n"));
}

TEST_CASE("dynamic: the multi-GPU pods' waits are reported on their own", "[bench][dynamic]") {
  // One node of two GPUs. big waits for s1 (leaves at 10); s2 fits beside s1 and starts at once;
  // big2 arrives after big left (15) and starts at once.
  const std::vector<model::Node> nodes = {to_node({"n", 64000, 1 << 20, 2, "T4"})};
  const Workload w =
      prepare_workload("micro", {timed("s1", 1, 1000, 0, 10), timed("big", 2, 1000, 1, 5),
                                 timed("s2", 1, 1000, 2, 1), timed("big2", 2, 1000, 20, 1)});
  const Arrivals a = make_dynamic_arrivals(w, nodes.size(), 42);
  const DynamicRun r = replay_dynamic(nodes, w, a, paper("bestfit"), 42, least_waits());
  CHECK(start_of(w, a, r, "big") == 10);
  CHECK(start_of(w, a, r, "s2") == 2);
  CHECK(r.pending_mean == Approx(9.0 / 4));
  CHECK(r.multi_gpu_started == 2);
  CHECK(r.multi_gpu_pending_mean == Approx(4.5));
  CHECK(r.multi_gpu_pending_max == 9);
  CHECK(r.multi_gpu_waited_pct == Approx(50.0));
  CHECK(r.multi_gpu_longest_bound == 9);  // s1 held the room big needed: nothing could do better
  const std::string line = dynamic_json_line({"micro", "bestfit", {42}, {r}, ""}, {});
  CHECK(line.find("\"multi_gpu_pending_max_s\":9.000,") != std::string::npos);
  const std::string table = dynamic_markdown_table({{"micro", "bestfit", {42}, {r}, ""}}, {});
  CHECK(table.find("| 4.5 ± 0.0 / 9 ± 0 |") != std::string::npos);
}

TEST_CASE("dynamic: the longest multi-GPU wait beside the least it could have been",
          "[bench][dynamic]") {
  // Two nodes of two GPUs. p1 takes one whole; p2 (leaves at 10) and p3 (at 50) fill the other.
  // q (1 GPU) and then r (2 GPUs) wait. At r's arrival the second node would be empty at 50,
  // but at 10 the FIFO retry gives p2's GPU to q, which stays, so r starts when p1 leaves.
  const std::vector<model::Node> nodes = {to_node({"a", 64000, 1 << 20, 2, "T4"}),
                                          to_node({"b", 64000, 1 << 20, 2, "T4"})};
  const Workload w =
      prepare_workload("micro", {timed("p1", 2, 1000, 0, 100), timed("p2", 1, 1000, 0, 10),
                                 timed("p3", 1, 1000, 0, 50), timed("q", 1, 1000, 1, 1000),
                                 timed("r", 2, 1000, 2, 5)});
  const Arrivals a = make_dynamic_arrivals(w, nodes.size(), 42);
  const DynamicRun run = replay_dynamic(nodes, w, a, paper("bestfit"), 42, least_waits());
  CHECK(start_of(w, a, run, "q") == 10);
  CHECK(start_of(w, a, run, "r") == 100);
  CHECK(run.multi_gpu_pending_max == 98);
  CHECK(run.multi_gpu_longest_bound == 48);
  // Off by default (a pass over the nodes per waiting multi-GPU arrival): unknown, null in JSON.
  const DynamicRun plain = replay_dynamic(nodes, w, a, paper("bestfit"), 42, {});
  CHECK(plain.multi_gpu_pending_max == 98);
  CHECK(std::isnan(plain.multi_gpu_longest_bound));
  CHECK(dynamic_json_line({"micro", "bestfit", {42}, {plain}, ""}, {})
            .find("\"multi_gpu_longest_bound_s\":null,") != std::string::npos);
}

TEST_CASE("dynamic: the least wait counts a node that has room long before it empties",
          "[bench][dynamic]") {
  // x fills b (2 GPUs, leaves at 50); y and z fill a (4 GPUs), y leaving at 10, z at 1000. r
  // (2 GPUs, at 3) has room on a at 10, though a empties last and b first.
  const std::vector<model::Node> nodes = {to_node({"a", 64000, 1 << 20, 4, "T4"}),
                                          to_node({"b", 64000, 1 << 20, 2, "T4"})};
  const Workload w =
      prepare_workload("micro", {timed("x", 2, 1000, 0, 50), timed("y", 2, 1000, 1, 9),
                                 timed("z", 2, 1000, 2, 998), timed("r", 2, 1000, 3, 5)});
  const Arrivals a = make_dynamic_arrivals(w, nodes.size(), 42);
  const DynamicRun run = replay_dynamic(nodes, w, a, paper("bestfit"), 42, least_waits());
  CHECK(start_of(w, a, run, "r") == 10);
  CHECK(run.multi_gpu_pending_max == 7);
  CHECK(run.multi_gpu_longest_bound == 7);
}

TEST_CASE("dynamic: a departure frees capacity for a waiting pod, past one that cannot fit",
          "[bench][dynamic]") {
  const std::vector<model::Node> nodes = two_single_gpu_nodes();
  // r3 asks two GPUs, which no node has: it waits for good but does not block r4, which starts
  // when r2 leaves at 10.
  const Workload w =
      prepare_workload("micro", {timed("r1", 1, 1000, 0, 100), timed("r2", 1, 1000, 0, 10),
                                 timed("r3", 2, 1000, 1, 10), timed("r4", 1, 1000, 2, 5),
                                 timed("r5", 0, 1000, 3, 1)});
  const Arrivals a = make_dynamic_arrivals(w, nodes.size(), 7);
  const DynamicRun r = replay_dynamic(nodes, w, a, paper("bestfit"), 7, {});
  CHECK(start_of(w, a, r, "r1") == 0);
  CHECK(start_of(w, a, r, "r2") == 0);
  CHECK(start_of(w, a, r, "r3") == -1);
  CHECK(start_of(w, a, r, "r4") == 10);
  CHECK(start_of(w, a, r, "r5") == 3);  // CPU only: it starts at once, next to the queue
  CHECK(r.never_placed == 1);
  CHECK(r.started == 4);
  CHECK(r.pending_max == 8);
  CHECK(r.waiting_curve.back() == 2);  // r3 and r4, at the last arrival

  SECTION("with a bounded wait, a pod gives up") {
    DynamicOptions opt;
    opt.max_wait = 5;  // r4 would wait 8 s
    const DynamicRun bounded = replay_dynamic(nodes, w, a, paper("bestfit"), 7, opt);
    CHECK(start_of(w, a, bounded, "r4") == -1);
    CHECK(bounded.never_placed == 2);
    CHECK(bounded.pending_max == 0);
  }
  SECTION("speedup compresses arrivals, not lifetimes") {
    DynamicOptions opt;
    opt.speedup = 2;  // arrivals at 0, 0, 0.5, 1, 1.5; r2 still leaves at 10
    const DynamicRun fast = replay_dynamic(nodes, w, a, paper("bestfit"), 7, opt);
    CHECK(start_of(w, a, fast, "r4") == 10);
    CHECK(fast.pending_max == 9);
    CHECK(fast.horizon == 1.5);
  }
}

TEST_CASE("dynamic: arrivals in creation order, simultaneous ones in a seeded order",
          "[bench][dynamic]") {
  std::vector<TracePod> pods;
  for (int i = 0; i < 20; ++i)
    pods.push_back(timed("s" + std::to_string(100 + i), 1, 1000, i % 3, 1));
  const Workload w = prepare_workload("ties", pods);
  const Arrivals a = make_dynamic_arrivals(w, 5, 42), b = make_dynamic_arrivals(w, 5, 42);
  const Arrivals c = make_dynamic_arrivals(w, 5, 43);
  for (std::size_t k = 1; k < a.order.size(); ++k) {
    CHECK(w.pods[a.order[k - 1]].creation_time <= w.pods[a.order[k]].creation_time);
  }
  CHECK(a.order == b.order);
  CHECK(a.node_priority == b.node_priority);
  CHECK(a.order != c.order);
}

TEST_CASE("dynamic: the same seed gives the same run, with one thread or two", "[bench][dynamic]") {
  SweepInput in;
  REQUIRE(load_inputs(kFixtures + "nodes.csv", {kFixtures + "pods.csv"}, &in) == "");
  const Workload& w = in.workloads[0];
  DynamicOptions opt;
  opt.speedup = 1000;  // 136 GPUs asked of 102: pods wait
  for (const char* name : {"random", "bestfit", "fgd", "gapless"}) {
    CAPTURE(name);
    const Arrivals a = make_dynamic_arrivals(w, in.nodes.size(), 42);
    const DynamicRun r = replay_dynamic(in.nodes, w, a, paper(name), 42, opt);
    const DynamicRun again = replay_dynamic(in.nodes, w, a, paper(name), 42, opt);
    CHECK(r.start == again.start);
    CHECK(r.alloc_curve == again.alloc_curve);
    CHECK(r.arrived == 160);
    CHECK(r.started + r.never_placed == 160);
    CHECK(r.pending_max > 0);
    for (std::size_t k = 0; k < r.start.size(); ++k) {
      if (r.start[k] >= 0) CHECK(r.start[k] >= r.arrival[k]);
    }
  }
  in.policies = {paper("bestfit"), paper("fgd")};
  const std::vector<int> seeds = {42, 43};
  const auto one = run_dynamic_sweep(in.nodes, in.workloads, in.policies, seeds, opt, 1, {});
  const auto two = run_dynamic_sweep(in.nodes, in.workloads, in.policies, seeds, opt, 2, {});
  REQUIRE(one.size() == 2);
  for (std::size_t c = 0; c < one.size(); ++c) {
    for (std::size_t s = 0; s < seeds.size(); ++s) {
      CHECK(one[c].runs[s].start == two[c].runs[s].start);
    }
  }
  auto without_timing = [&](const DynamicCell& c) {
    const std::string line = dynamic_json_line(c, opt);
    return line.substr(0, line.find(",\"seconds_per_run\""));
  };
  CHECK(without_timing(one[0]) == without_timing(two[0]));
  CHECK(dynamic_markdown_table(one, opt) == dynamic_markdown_table(two, opt));
}

TEST_CASE("dynamic: with drain.minGpus a waiting 2-GPU pod starts when its drain target empties",
          "[bench][dynamic][drain]") {
  // Two 2-GPU nodes. L1 and L2 hold one node for good; S1 and S2 fill the other until 11 and
  // 21. B (2 GPUs) arrives at 2 and waits; W (1 GPU, 100 s) arrives at 3 and waits. At 11 S1
  // leaves: without a reservation W takes that GPU and B waits for W (until 111). With one, B,
  // found waiting again, holds that node (the closest to taking it), W does not get it, and B
  // starts at 21 when S2 leaves; W then waits for B (5 s).
  const auto [nodes, w] = drain_scenario();
  const Arrivals a = make_dynamic_arrivals(w, nodes.size(), 42);
  DynamicOptions opt;
  PolicySetup off = paper("bestfit");
  PolicySetup on = off;
  on.profile.drain_min_gpus = 2;

  const DynamicRun without = replay_dynamic(nodes, w, a, off, 42, opt);
  CHECK(start_of(w, a, without, "W") == 11);
  CHECK(start_of(w, a, without, "B") == 111);

  const DynamicRun with = replay_dynamic(nodes, w, a, on, 42, opt);
  CHECK(start_of(w, a, with, "B") == 21);
  CHECK(start_of(w, a, with, "W") == 26);
  CHECK(with.pending_max < without.pending_max);
}
