// What the bench added to the engine: host resources (CPU, memory) checked like kube-scheduler's
// NodeResourcesFit and held by allocations, whole-GPU pods counted by size per node, and
// score_fitting_node. Nodes and requests without host resources behave as before.
#include <catch2/catch.hpp>

#include "bench_nodes.h"
#include "gapless/model/cluster.h"
#include "gapless/placement/engine.h"
#include "gapless/placement/fit.h"
#include "gapless/placement/strategy.h"

using namespace gapless;
using namespace gapless::bench::testing;
using placement::FitCode;
using placement::FitReason;

TEST_CASE("host resources filter like NodeResourcesFit", "[bench][engine]") {
  const model::Node n = node_with("n", 16000, 2, {}, 12000);  // 4 of 16 cores left
  CHECK(placement::quick_fit(n, share(500, 4000)).code == FitCode::kFits);
  const auto now = placement::quick_fit(n, share(500, 6000));
  CHECK(now.code == FitCode::kFullNow);
  CHECK(now.why == FitReason::kInsufficientCpu);
  const auto never = placement::quick_fit(n, share(500, 32000));
  CHECK(never.code == FitCode::kUnresolvable);
  CHECK(placement::describe(FitReason::kInsufficientCpu, share(500)) ==
        "gapless: node lacks the CPU this pod requests");
  CHECK(placement::label(FitReason::kInsufficientMemory) == "insufficient_memory");
  // A CPU-only pod fits wherever the CPU does.
  CHECK(placement::quick_fit(n, cpu_only(4000)).code == FitCode::kFits);
  CHECK(placement::quick_fit(n, cpu_only(5000)).code == FitCode::kFullNow);
  // Memory: the node has 1 TiB (node_with).
  model::GpuRequest big = cpu_only(1000);
  big.host.memory_mib = 2 << 20;
  CHECK(placement::quick_fit(n, big).why == FitReason::kInsufficientMemory);
}

TEST_CASE("untracked host resources are not checked", "[bench][engine]") {
  model::Node n = node_with("n", 16000, 2, {});
  n.host = {};  // the extender's nodes
  CHECK(placement::quick_fit(n, share(500, 1 << 30)).code == FitCode::kFits);
  model::GpuRequest none = share(500);  // the extender's requests
  const model::Node tracked = node_with("t", 16000, 2, {}, 16000);
  CHECK(placement::quick_fit(tracked, none).code == FitCode::kFits);
}

TEST_CASE("allocations hold host resources and whole-GPU pods by size", "[bench][engine]") {
  model::Cluster c;
  c.upsert_node(node_with("n", 16000, 4, {}));
  model::Allocation a;
  a.pod_uid = "a";
  a.node = "n";
  a.gpus = {{0, "", 0, 0, 0}, {1, "", 0, 0, 0}};
  a.host = {6000, 1024};
  REQUIRE(c.commit(a).ok());
  const model::Node* n = c.find_node("n");
  CHECK(n->host_used == model::HostResources{6000, 1024});
  CHECK(n->whole_pods == std::map<int, int>{{2, 1}});
  model::Allocation b = a;
  b.pod_uid = "b";
  b.gpus = {{2, "", 0, 0, 0}};
  b.host = {12000, 0};  // 6 + 12 > 16 cores
  const Status s = c.commit(b);
  REQUIRE_FALSE(s.ok());
  CHECK(s.error() == "node n lacks the CPU");
  CHECK_FALSE(c.find_node("n")->gpus[2].used.whole);  // nothing applied
  b.host = {10000, 0};
  REQUIRE(c.commit(b).ok());
  CHECK(n->whole_pods == std::map<int, int>{{1, 1}, {2, 1}});
  REQUIRE(c.release("a"));
  CHECK(n->host_used == model::HostResources{10000, 0});
  CHECK(n->whole_pods == std::map<int, int>{{1, 1}});
  // Re-inventory re-applies what pods hold.
  c.upsert_node(node_with("n", 16000, 4, {}));
  CHECK(c.find_node("n")->host_used == model::HostResources{10000, 0});
  CHECK(c.find_node("n")->whole_pods == std::map<int, int>{{1, 1}});
}

TEST_CASE("score_fitting_node: score_node for fitting nodes, and CPU-only pods ranked",
          "[bench][engine]") {
  const model::Node n = node_with("n", 96000, 2, {0, 500}, 32000);
  placement::Profile p;
  p.node = {{placement::find_strategy("bestfit"), 1.0}};
  p.gpu = {{placement::find_strategy("bestfit"), 1.0}};
  p.gpu_weight = 0;
  CHECK(placement::score_fitting_node(n, share(300, 8000), p) ==
        placement::score_node(n, share(300, 8000), p));
  CHECK(placement::score_node(n, cpu_only(8000), p) == 0.0);
  // BestFit for a CPU-only pod: s = 0.5 * 56000 / 128000 + 0.5 * 1500 / 8000 -> int(68.75)
  CHECK(placement::score_fitting_node(n, cpu_only(8000), p) == 0.68);
  // With GPU weight the pick counts, as in score_node.
  p.gpu_weight = 1;
  CHECK(placement::score_fitting_node(n, share(300, 8000), p) ==
        Approx(placement::score_node(n, share(300, 8000), p)));
}
