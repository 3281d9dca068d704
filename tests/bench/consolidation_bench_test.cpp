// The dynamic replay with consolidation (--movable): a multi-GPU pod that fits no node starts at
// once when moving a movable pod makes room, the moved pod restarts elsewhere, and the moves
// and the GPU-time they lose are counted.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "bench_nodes.h"
#include "bench_policies.h"
#include "replay.h"
#include "report.h"

using namespace gapless;
using namespace gapless::bench;
using namespace gapless::bench::testing;

TEST_CASE("dynamic with movable pods: room made for a waiting multi-GPU pod",
          "[bench][dynamic][consolidation]") {
  const std::vector<model::Node> nodes = crowded_scenario().nodes;
  const Workload w = crowded_scenario().workload;
  const Arrivals a = make_dynamic_arrivals(w, nodes.size(), 42);

  const DynamicRun still = replay_dynamic(nodes, w, a, paper("spread"), 42, DynamicOptions{});
  CHECK(start_of(w, a, still, "four") == 100);
  CHECK(still.moves == 0);

  DynamicOptions opt;
  opt.movable = 1;  // every pod movable
  const DynamicRun moved = replay_dynamic(nodes, w, a, paper("spread"), 42, opt);
  // Moving small (1 GPU, 9 s run) or big (3 GPUs, 10 s run) would each do: one eviction both,
  // and small loses less GPU-time.
  CHECK(start_of(w, a, moved, "four") == 10);
  CHECK(moved.plans_applied == 1);
  CHECK(moved.moves == 1);
  CHECK(moved.moved_unplaced == 0);
  CHECK(moved.gpu_seconds_lost == Approx(9.0));
  CHECK(moved.moves_per_1000 == Approx(1000.0 / 3));
  CHECK(moved.started == 3);
  CHECK(moved.multi_gpu_pending_max == 0);
  // small restarted at 10 and runs its full 100 s: the replay ends when it leaves at 110.
  CHECK(moved.alloc_curve.size() == still.alloc_curve.size());

  const DynamicRun again = replay_dynamic(nodes, w, a, paper("spread"), 42, opt);
  CHECK(again.start == moved.start);
  CHECK(again.gpu_seconds_lost == moved.gpu_seconds_lost);

  SECTION("the report carries the moves and their cost") {
    DynamicCell cell;
    cell.trace = "micro";
    cell.policy = "spread";
    cell.seeds = {42};
    cell.runs = {moved};
    const std::string line = dynamic_json_line(cell, opt);
    CHECK(line.find("\"moves_per_1000\":333.333") != std::string::npos);
    CHECK(line.find("\"gpu_seconds_lost\":9.0") != std::string::npos);
    CHECK(dynamic_markdown_table({cell}, opt).find("moves / 1,000 pods") != std::string::npos);
    CHECK(dynamic_json_line(cell, DynamicOptions{}).find("moves") == std::string::npos);
  }
}

TEST_CASE("dynamic with no movable pods: nothing moves", "[bench][dynamic][consolidation]") {
  const std::vector<model::Node> nodes = crowded_scenario().nodes;
  const Workload w = crowded_scenario().workload;
  const Arrivals a = make_dynamic_arrivals(w, nodes.size(), 42);
  DynamicOptions opt;
  opt.movable = 0.000001;  // consolidation on, but (almost surely) no pod drawn movable
  const DynamicRun r = replay_dynamic(nodes, w, a, paper("spread"), 42, opt);
  CHECK(r.moves == 0);
  CHECK(start_of(w, a, r, "four") == 100);
}

TEST_CASE("dynamic with movable pods: the least wait counts smaller movable pods as gone",
          "[bench][dynamic][consolidation]") {
  // Both nodes full (3 + 1 GPUs each): evicting both pods of a node would make room for four,
  // but neither could be placed again, so no plan exists and four waits until a node empties.
  const std::vector<model::Node> nodes = crowded_scenario().nodes;
  const Workload w =
      prepare_workload("full", {timed("big", 3, 1000, 0, 100), timed("small", 1, 1000, 1, 100),
                                timed("big2", 3, 1000, 2, 100), timed("small2", 1, 1000, 3, 100),
                                timed("four", 4, 1000, 10, 5)});
  const Arrivals a = make_dynamic_arrivals(w, nodes.size(), 42);
  DynamicOptions opt;
  opt.least_waits = true;
  opt.movable = 0.000001;  // (almost surely) none movable: the trace's own lifetimes
  const DynamicRun fixed = replay_dynamic(nodes, w, a, paper("spread"), 42, opt);
  const double waited = start_of(w, a, fixed, "four") - 10;
  CHECK(waited > 0);
  CHECK(fixed.multi_gpu_longest_bound == Approx(waited));

  // All movable: no plan on arrival still (a plan comes once big has left), but evicting the
  // smaller pods, had they somewhere to go, would have made room at once.
  opt.movable = 1;
  const DynamicRun movable = replay_dynamic(nodes, w, a, paper("spread"), 42, opt);
  CHECK(start_of(w, a, movable, "four") >= 100);
  CHECK(movable.multi_gpu_longest_bound == 0);
}
