// The dynamic replay as deployed with movable pods (--movable --scheduler-config): the
// extender's consolidation driver plans through the engine, holds the node it frees, the evicted
// pods come back through kube-scheduler, and the waiting pod starts on the room made.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "bench_nodes.h"
#include "bench_policies.h"
#include "deployed.h"
#include "replay.h"

using namespace gapless;
using namespace gapless::bench;
using namespace gapless::bench::testing;

namespace {

DynamicRun deployed_run(const std::vector<model::Node>& nodes, const Workload& w, const Arrivals& a,
                        const DynamicOptions& options) {
  const PolicySetup policy = with_consolidation(paper("spread"), options);
  auto port = in_process_extender(nodes, policy);
  return replay_dynamic_deployed(nodes, w, a, shipped_config(), *port, 42, options);
}

}  // namespace

TEST_CASE("dynamic as deployed with movable pods: the extender's driver makes room",
          "[bench][deployed][dynamic][consolidation]") {
  const std::vector<model::Node> nodes = crowded_scenario().nodes;
  const Workload w = crowded_scenario().workload;
  const Arrivals a = make_dynamic_arrivals(w, nodes.size(), 42);

  const DynamicRun still = deployed_run(nodes, w, a, DynamicOptions{});
  REQUIRE(start_of(w, a, still, "four") == 100);  // the scenario: four waits for big to end
  CHECK(still.moves == 0);

  DynamicOptions opt;
  opt.movable = 1;  // every pod movable: annotated, with a ReplicaSet owner
  const DynamicRun moved = deployed_run(nodes, w, a, opt);
  // As in-process: evicting small loses the least GPU-time; its replacement goes through
  // kube-scheduler while the freed node is held for four, so it lands beside big.
  CHECK(start_of(w, a, moved, "four") == 10);
  CHECK(moved.plans_applied == 1);
  CHECK(moved.moves == 1);
  CHECK(moved.moved_unplaced == 0);
  CHECK(moved.gpu_seconds_lost == Approx(9.0));
  CHECK(moved.started == 3);
  CHECK(moved.multi_gpu_pending_max == 0);

  const DynamicRun again = deployed_run(nodes, w, a, opt);
  CHECK(again.start == moved.start);
  CHECK(again.gpu_seconds_lost == moved.gpu_seconds_lost);
}

TEST_CASE("dynamic as deployed: no movable pod, no move",
          "[bench][deployed][dynamic][consolidation]") {
  const std::vector<model::Node> nodes = crowded_scenario().nodes;
  const Workload w = crowded_scenario().workload;
  const Arrivals a = make_dynamic_arrivals(w, nodes.size(), 42);
  DynamicOptions opt;
  opt.movable = 0.000001;  // consolidation on, but (almost surely) no pod drawn movable
  const DynamicRun r = deployed_run(nodes, w, a, opt);
  CHECK(r.moves == 0);
  CHECK(start_of(w, a, r, "four") == 100);
}

TEST_CASE("a movable trace pod carries the annotation and a ReplicaSet owner",
          "[bench][deployed][consolidation]") {
  const TracePod p = timed("p", 1, 1000, 0, 10);
  const std::string plain = pod_json(p, "u"), movable = pod_json(p, "u", true);
  CHECK(plain.find("gapless.io/movable") == std::string::npos);
  CHECK(plain.find("ownerReferences") == std::string::npos);
  CHECK(movable.find("\"gapless.io/movable\":\"true\"") != std::string::npos);
  CHECK(movable.find("\"kind\":\"ReplicaSet\"") != std::string::npos);
}
