// The FGD paper's baselines as engine strategies, on examples worked out from the formulas of
// docs/packing-benchmark.md §4 (scores on the simulator's 0..100 scale, as hundredths).
#include <catch2/catch.hpp>

#include <map>

#include "bench_nodes.h"
#include "gapless/placement/choice.h"
#include "gapless/placement/fragmentation.h"
#include "gapless/placement/profile.h"
#include "gapless/placement/strategy.h"

using namespace gapless;
using namespace gapless::bench::testing;
using placement::find_strategy;

namespace {

double node_score(const char* strategy, const model::Node& n, const model::GpuRequest& r,
                  const placement::ScoreContext& ctx = {}) {
  return find_strategy(strategy)->score_node_in(ctx, n, r);
}

placement::Profile paper_profile(const char* strategy) {
  placement::Profile p;
  p.node = {{find_strategy(strategy), 1.0}};
  p.gpu = {{find_strategy(strategy), 1.0}};
  p.gpu_weight = 0;
  p.topology_weight = 0;
  return p;
}

std::vector<int> picked(const model::Node& n, const model::GpuRequest& r,
                        const placement::Profile& p) {
  auto c = placement::choose(n, r, p);
  REQUIRE(c.has_value());
  std::vector<int> out;
  for (const auto& g : c->gpus) out.push_back(g.index);
  return out;
}

// 64 of 96 cores left; GPUs with 1000 and 500 milli left (idle 1500).
model::Node half_node() {
  return node_with("h", 96000, 2, {0, 500}, 32000);
}

}  // namespace

TEST_CASE("the registry knows the baselines", "[bench][baselines]") {
  for (const char* name : {"random", "dotprod", "clustering", "packing", "bestfit", "fgd"}) {
    const placement::Strategy* s = find_strategy(name);
    REQUIRE(s != nullptr);
    CHECK(s->name() == name);
    CHECK_FALSE(s->description().empty());
  }
  CHECK(find_strategy("random")->uses_draw());
  CHECK_FALSE(find_strategy("fgd")->uses_draw());
}

TEST_CASE("bestfit: int(100 (1 - s)) with s the halved normalised leftovers",
          "[bench][baselines]") {
  // s = 0.5 (64000 - 8000) / 128000 + 0.5 (1500 - 300) / 8000 = 0.21875 + 0.075 -> 70.625
  CHECK(node_score("bestfit", half_node(), share(300, 8000)) == 0.70);
  // A fuller node wins: 8 cores and 500 milli left -> s = 0 + 0.0125 -> 98.75
  const model::Node full = node_with("f", 16000, 1, {500}, 8000);
  CHECK(node_score("bestfit", full, share(300, 8000)) == 0.98);
}

TEST_CASE("dotprod: int(100 (1 - node.pod / 2)), normalised by the largest node",
          "[bench][baselines]") {
  // node (0.5, 0.1875), pod (0.0625, 0.0375): dot 0.03828125 -> 100 (1 - 0.019140625) = 98.09
  CHECK(node_score("dotprod", half_node(), share(300, 8000)) == 0.98);
  // An empty 8-GPU node with all 128 cores, a 4-GPU pod with 64 cores: dot = 0.5 + 0.5 -> 50
  const model::Node big = node_with("b", 128000, 8, {});
  CHECK(node_score("dotprod", big, whole(4, 64000)) == 0.50);
}

TEST_CASE("clustering: same tag alone 75+, among others 50+, empty 25+, other tags only",
          "[bench][baselines]") {
  const model::Node empty = node_with("e", 96000, 8, {});
  CHECK(node_score("clustering", empty, share(500)) == 0.25);  // 25 + 25*0/8000
  // Only share pods, 500 milli used: fill = 25 * 500 / 8000 = 1 (integer division).
  const model::Node shared = node_with("s", 96000, 8, {500});
  CHECK(node_score("clustering", shared, share(300)) == 0.76);
  CHECK(node_score("clustering", shared, whole(1)) == 0.01);
  // A share and a 2-GPU pod: fill = 25 * 2500 / 8000 = 7.
  model::Node mixed = node_with("m", 96000, 8, {500, 1000, 1000}, 0, "T4", 2);
  CHECK(node_score("clustering", mixed, share(300)) == 0.57);
  CHECK(node_score("clustering", mixed, whole(2)) == 0.57);
  CHECK(node_score("clustering", mixed, whole(4)) == 0.07);
  CHECK(node_score("clustering", mixed, cpu_only(1000)) == 0.0);
}

TEST_CASE("packing: used GPUs, then free GPUs of a used node, then the smallest empty node",
          "[bench][baselines]") {
  CHECK(node_score("packing", node_with("e8", 96000, 8, {}), share(250)) == 0.25);  // 33 - 8
  CHECK(node_score("packing", node_with("e2", 96000, 2, {}), share(250)) == 0.31);
  CHECK(node_score("packing", node_with("e1", 96000, 1, {}), share(250)) == 0.32);
  // 1000, 600, 300, 1000 left. A 250 share fits the 300 GPU: 100 - (30 / 10) = 97.
  const model::Node used = node_with("u", 96000, 4, {0, 400, 700, 0});
  CHECK(node_score("packing", used, share(250)) == 0.97);
  CHECK(node_score("packing", used, share(500)) == 0.94);  // the 600 GPU: 100 - 60 / 10
  CHECK(node_score("packing", used, share(700)) == 0.49);  // must take a free GPU: 50 - 1
  CHECK(node_score("packing", used, whole(2)) == 0.48);
  CHECK(node_score("packing", used, cpu_only(1000)) == 0.0);
}

TEST_CASE("best-fit GPU choice: the tightest GPU, whole GPUs from the lowest index",
          "[bench][baselines]") {
  const model::Node used = node_with("u", 96000, 4, {0, 400, 700, 0});
  for (const char* s : {"dotprod", "clustering", "packing", "bestfit"}) {
    CAPTURE(s);
    CHECK(picked(used, share(250), paper_profile(s)) == std::vector<int>{2});
    CHECK(picked(used, share(500), paper_profile(s)) == std::vector<int>{1});
    CHECK(picked(used, whole(2), paper_profile(s)) == std::vector<int>{0, 3});
  }
}

TEST_CASE("fgd: int(100 sigmoid(delta / 1000)), first best GPU for a share", "[bench][baselines]") {
  // 4 T4s with 1000, 600, 300, 0 left, 8 cores left; the mix is one 500-milli, 4-core task.
  const model::Node a = node_with("a", 32000, 4, {0, 400, 700, 1000}, 24000);
  placement::WorkloadMix mix;
  mix.entries = {{placement::TaskShape{4000, 500, 1, {}}, 1.0}};
  placement::ScoreContext ctx;
  ctx.workload = &mix;
  const auto req = share(500, 4000);
  const auto* fgd = find_strategy("fgd");
  // GPU 0 (1000 -> 500): fragment stays 300, delta 0 -> 50.
  CHECK(fgd->score_gpu_in(ctx, a, a.gpus[0], req) == 0.50);
  // GPU 1 (600 -> 100): fragment 400, delta -100 -> int(47.5) = 47.
  CHECK(fgd->score_gpu_in(ctx, a, a.gpus[1], req) == 0.47);
  CHECK(fgd->score_node_in(ctx, a, req) == 0.50);
  placement::Profile p = paper_profile("fgd");
  p.context = ctx;
  CHECK(picked(a, req, p) == std::vector<int>{0});
  // The same with a fragment cache: identical scores.
  placement::FragmentCache cache(mix);
  const model::Node* nodes[] = {&a};
  cache.rebuild(nodes);
  ctx.fragments = &cache;
  CHECK(fgd->score_node_in(ctx, a, req) == 0.50);
  // A CPU-only pod taking 6 of the 8 cores leaves too few for the task: delta -1600 -> 16.
  CHECK(fgd->score_node_in(ctx, a, cpu_only(6000)) == 0.16);
  // Without a mix, the request's own shape is the mix.
  CHECK(fgd->score_node_in({}, a, req) == 0.50);
}

TEST_CASE("random: a uniform node per draw, reproducible", "[bench][baselines]") {
  std::vector<model::Node> nodes;
  for (int i = 0; i < 4; ++i)
    nodes.push_back(node_with(std::string(1, static_cast<char>('a' + i)), 96000, 2, {}));
  std::map<int, int> wins;
  placement::ScoreContext ctx;
  for (std::uint64_t draw = 1; draw <= 4000; ++draw) {
    ctx.draw = draw;
    int best = 0;
    for (int i = 1; i < 4; ++i) {
      if (node_score("random", nodes[i], share(100), ctx) >
          node_score("random", nodes[best], share(100), ctx)) {
        best = i;
      }
    }
    ++wins[best];
  }
  for (const auto& [node, n] : wins) {
    CAPTURE(node);
    CHECK(n > 850);
    CHECK(n < 1150);
  }
  ctx.draw = 7;
  CHECK(node_score("random", nodes[0], share(100), ctx) ==
        node_score("random", nodes[0], share(100), ctx));
  const auto* r = find_strategy("random");
  CHECK(r->score_gpu_in(ctx, nodes[0], nodes[0].gpus[1], whole(1)) == 1.0);
}
