// The offline packing's repair (bench/offline_repair.h): on any feasible packing it returns a
// feasible one (checked here by committing it to a model::Cluster, which refuses any GPU, share,
// CPU or memory over-commitment) that allocates at least as much, never more than the LP bound,
// and it finds the moves a greedy packing misses.
#include <catch2/catch.hpp>

#include <algorithm>
#include <random>

#include "gapless/model/cluster.h"
#include "limit.h"
#include "lp_bound.h"
#include "offline_repair.h"
#include "random_limit.h"
#include "replay.h"

using namespace gapless;
using namespace gapless::bench;
using gapless::bench::testing::limit_pod;

namespace {

struct Instance {
  std::vector<model::Node> nodes;
  Workload w;
  LimitInstance in;
};

Instance instance(const std::vector<TraceNode>& trace_nodes, const std::vector<TracePod>& pods) {
  Instance i;
  for (const TraceNode& t : trace_nodes) i.nodes.push_back(to_node(t));
  std::sort(i.nodes.begin(), i.nodes.end(), [](auto& a, auto& b) { return a.name < b.name; });
  i.w = prepare_workload("t", pods);
  std::vector<int> all(i.w.pods.size());
  for (std::size_t p = 0; p < all.size(); ++p) all[p] = static_cast<int>(p);
  i.in = make_limit_instance(i.nodes, i.w, all);
  return i;
}

model::Allocation allocation(const Instance& i, std::size_t slot, int node,
                             const std::vector<int>& gpus) {
  const model::GpuRequest& r = i.w.requests[i.in.pods[slot]];
  model::Allocation a;
  a.pod_uid = a.pod_name = std::to_string(slot);
  a.node = i.nodes[node].name;
  a.host = r.host;
  const int share = r.kind == model::RequestKind::kShared ? r.shared.compute_milli : 0;
  for (int g : gpus) a.gpus.push_back({g, i.nodes[node].gpus[g].uuid, 0, share, 0});
  return a;
}

bool model_allowed(const Instance& i, std::size_t slot, int node) {
  const std::vector<std::string>& m = i.w.requests[i.in.pods[slot]].models;
  return m.empty() || std::find(m.begin(), m.end(), i.nodes[node].gpus.front().model) != m.end();
}

// "" when every placed pod commits to a fresh cluster, on a model it allows, with as many GPUs
// as it asks; else what failed.
std::string infeasible(const Instance& i, const Packing& p) {
  model::Cluster c;
  for (const model::Node& n : i.nodes) c.upsert_node(n);
  for (std::size_t s = 0; s < p.node.size(); ++s) {
    if (p.node[s] < 0) continue;
    const model::GpuRequest& r = i.w.requests[i.in.pods[s]];
    const int asked = r.kind == model::RequestKind::kWhole    ? r.whole
                      : r.kind == model::RequestKind::kShared ? 1
                                                              : 0;
    if (static_cast<int>(p.gpus[s].size()) != asked) return "pod " + std::to_string(s) + " GPUs";
    if (!model_allowed(i, s, p.node[s])) return "pod " + std::to_string(s) + " model";
    if (Status st = c.commit(allocation(i, s, p.node[s], p.gpus[s])); !st) return st.error();
  }
  return "";
}

// A feasible but careless packing: pods in random order, each on a random node and GPUs that
// take it (the cluster decides), some left out although they fit.
Packing random_packing(const Instance& i, std::mt19937& rng) {
  model::Cluster c;
  for (const model::Node& n : i.nodes) c.upsert_node(n);
  Packing p{std::vector<int>(i.in.pods.size(), -1),
            std::vector<std::vector<int>>(i.in.pods.size())};
  std::vector<std::size_t> slots(i.in.pods.size());
  for (std::size_t s = 0; s < slots.size(); ++s) slots[s] = s;
  std::shuffle(slots.begin(), slots.end(), rng);
  for (std::size_t s : slots) {
    const model::GpuRequest& r = i.w.requests[i.in.pods[s]];
    if (i.in.pod_shape[s] < 0 || rng() % 4 == 0) continue;
    const int node = static_cast<int>(rng() % i.nodes.size());
    const int gpus = static_cast<int>(i.nodes[node].gpus.size());
    if (gpus == 0 || !model_allowed(i, s, node)) continue;
    std::vector<int> picked;
    const int asked = r.kind == model::RequestKind::kWhole ? r.whole : 1;
    for (int g = static_cast<int>(rng() % gpus); static_cast<int>(picked.size()) < asked; ++g) {
      if (static_cast<int>(picked.size()) >= gpus) break;
      picked.push_back(g % gpus);
    }
    if (static_cast<int>(picked.size()) < asked) continue;
    if (c.commit(allocation(i, s, node, picked))) {
      p.node[s] = node;
      p.gpus[s] = picked;
    }
  }
  return p;
}

// The repair of a feasible start, checked feasible.
Packing repaired_checked(const Instance& i, const Packing& start) {
  REQUIRE(infeasible(i, start) == "");
  Packing repaired = repair_packing(i.nodes, i.w, i.in, start);
  CHECK(infeasible(i, repaired) == "");
  return repaired;
}

}  // namespace

TEST_CASE("the repair never makes a packing infeasible or worse", "[bench][limit][repair]") {
  testing::RandomLimit random(11, {5, 6, 4, 4, 4, 24, 3, 10, true});
  int better = 0;
  for (int round = 0; round < 80; ++round) {
    const std::vector<TraceNode> nodes = random.nodes();
    const std::vector<TracePod> pods = random.pods();
    const Instance i = instance(nodes, pods);
    const Packing start = random_packing(i, random.rng());
    REQUIRE(infeasible(i, start).empty());
    RepairStats stats;
    const Packing repaired = repair_packing(i.nodes, i.w, i.in, start, &stats);
    const std::int64_t before = packed_milli(i.w, i.in, start);
    const std::int64_t after = packed_milli(i.w, i.in, repaired);
    const LpBound lp = solve_lp_bound(i.in);
    INFO("round " << round << ": " << before << " -> " << after << ", LP " << lp.allocated_milli);
    CHECK(infeasible(i, repaired) == "");
    CHECK(after >= before);
    CHECK(static_cast<double>(after) <= lp.allocated_milli + 1e-6);
    CHECK(stats.passes >= 1);
    better += after > before ? 1 : 0;
  }
  CHECK(better >= 20);  // the careless packings leave room the repair uses
}

TEST_CASE("the repair moves pods out of the way", "[bench][limit][repair]") {
  SECTION("a share takes a GPU whose small share moves to the other GPU") {
    // 300 on g0 and 700 on g1 leave 700 and 300: the 800 fits only once the 300 joins the 700.
    const Instance i =
        instance({{"n0", 64000, 1 << 20, 1, "T4"}, {"n1", 64000, 1 << 20, 1, "T4"}},
                 {limit_pod(1, 300, 1000), limit_pod(1, 700, 1000), limit_pod(1, 800, 1000)});
    const Packing start{{0, 1, -1}, {{0}, {0}, {}}};
    const Packing repaired = repaired_checked(i, start);
    CHECK(packed_milli(i.w, i.in, repaired) == 1800);
    CHECK(repaired.node == std::vector<int>{1, 1, 0});
  }
  SECTION("a CPU-heavy pod takes a node's CPU by a chain of two moves") {
    // n1 has an idle GPU but 8 cores left for the 10-core pod; X (4 cores) leaves n1 for n0,
    // whose only GPU Y (1 core) gives up for n1's last GPU.
    const Instance i =
        instance({{"n0", 4000, 1 << 20, 1, "T4"}, {"n1", 12000, 1 << 20, 2, "T4"}},
                 {limit_pod(1, 1000, 4000), limit_pod(1, 1000, 1000), limit_pod(1, 1000, 10000)});
    const Packing start{{1, 0, -1}, {{0}, {0}, {}}};
    const Packing repaired = repaired_checked(i, start);
    CHECK(packed_milli(i.w, i.in, repaired) == 3000);
    CHECK(repaired.node == std::vector<int>{0, 1, 1});
  }
  SECTION("a pod without GPUs gives its CPU to a GPU pod, and is put back where it fits") {
    // n0's 8 cores: the CPU-only pod's 6 leave too few for the GPU pod's 4; n1 has 2 cores.
    const Instance i =
        instance({{"n0", 8000, 1 << 20, 1, "T4"}, {"n1", 2000, 1 << 20, 1, "T4"}},
                 {limit_pod(0, 0, 6000), limit_pod(1, 1000, 4000), limit_pod(0, 0, 2000)});
    const Packing start{{0, -1, -1}, {{}, {}, {}}};
    const Packing repaired = repaired_checked(i, start);
    CHECK(packed_milli(i.w, i.in, repaired) == 1000);
    CHECK(repaired.node == std::vector<int>{-1, 0, 1});  // the 2-core pod fits n1 exactly
  }
  SECTION("nothing fits better: the packing is kept as it is") {
    const Instance i = instance({{"n0", 64000, 1 << 20, 1, "T4"}},
                                {limit_pod(1, 600, 1000), limit_pod(1, 600, 1000)});
    const Packing start{{0, -1}, {{0}, {}}};
    const Packing repaired = repaired_checked(i, start);
    CHECK(repaired.node == start.node);
    CHECK(repaired.gpus == start.gpus);
  }
}
