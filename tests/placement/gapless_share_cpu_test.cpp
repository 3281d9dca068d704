// The gapless share rule's CPU term (issue 42): a share pays for the live GPU room it leaves its
// node without the CPU to use, at the learned CPU per GPU milli of the pods asking GPUs.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "gapless/model/node.h"
#include "gapless/model/request.h"
#include "gapless/placement/strategy.h"
#include "gapless/placement/workload.h"

namespace {

using gapless::model::GpuRequest;
using gapless::model::Node;
using gapless::placement::ScoreContext;
using gapless::placement::ShapeCounts;
using gapless::placement::TaskShape;
using gapless::placement::WorkloadMix;

// A node of `gpus` GPUs with `cpu` cores' worth of CPU milli, `cpu_used` of it taken, and
// used[i] milli taken by shares on GPU i.
Node shares_node(const std::string& name, std::int64_t cpu, std::int64_t cpu_used, int gpus,
                 const std::vector<int>& used = {}) {
  Node n;
  n.name = name;
  for (int i = 0; i < gpus; ++i) {
    gapless::model::Gpu g;
    g.index = i;
    g.model = "T4";
    if (i < static_cast<int>(used.size()) && used[i] > 0) {
      g.used.shared_pods = 1;
      g.used.compute_used_milli = used[i];
    }
    n.gpus.push_back(g);
  }
  n.links = gapless::model::LinkGraph(gpus);
  n.host = {cpu, 1 << 20};
  n.host_used = {cpu_used, 0};
  return n;
}

GpuRequest share(int milli, std::int64_t cpu) {
  GpuRequest r;
  r.kind = gapless::model::RequestKind::kShared;
  r.shared = {0, milli, 1};
  r.host = {cpu, 0};
  return r;
}

// Shares only, as on gpushare100: no whole-GPU pods, so the CPU tie-breaks do not act.
// 470s and 320s asking 4.7 and 3.2 cores: 10 CPU milli per GPU milli.
WorkloadMix shares_mix() {
  ShapeCounts counts;
  counts[TaskShape{4700, 470, 1, {}}] = 50;
  counts[TaskShape{3200, 320, 1, {}}] = 50;
  return gapless::placement::typical_mix(counts);
}

double score(const WorkloadMix& mix, const Node& node, const GpuRequest& req) {
  const ScoreContext ctx{&mix, nullptr};
  return gapless::placement::find_strategy("gapless")->score_node_in(ctx, node, req);
}

}  // namespace

TEST_CASE("the mix knows the CPU a GPU milli comes with", "[placement][gapless]") {
  const WorkloadMix mix = shares_mix();
  CHECK(mix.cpu_per_whole_gpu == 0);  // no whole-GPU pods seen
  CHECK(mix.cpu_per_gpu_milli == Approx(10.0));
  ShapeCounts whole;
  whole[TaskShape{8000, 1000, 2, {}}] = 1;  // 8 cores for 2,000 milli
  whole[TaskShape{}] = 5;                   // CPU-only pods do not count
  CHECK(gapless::placement::typical_mix(whole).cpu_per_gpu_milli == Approx(4.0));
}

TEST_CASE("gapless: a share keeps off a node whose CPU it would leave short of its GPU room",
          "[placement][gapless]") {
  const WorkloadMix mix = shares_mix();
  const GpuRequest heavy = share(470, 8000);  // 17 CPU milli per GPU milli; the mix asks 10
  // Both nodes take the 470 on a fresh GPU: the same dead room, the same partly used GPUs. After
  // it both have 3,530 milli of live GPU room; `rich` 40 cores, enough for 4,000; `poor` 12.7,
  // which serve 1,270 of it: 2,260 milli without CPU, 330 more than before.
  const Node rich = shares_node("rich", 48000, 0, 4);
  const Node poor = shares_node("poor", 48000, 27300, 4);
  CHECK(score(mix, rich, heavy) > score(mix, poor, heavy));
  // A share that asks CPU at the mix's rate leaves the CPU short by no more than before.
  Node untracked_poor = poor;
  untracked_poor.host = {0, 1 << 20};
  untracked_poor.host_used = {0, 0};
  CHECK(score(mix, poor, share(470, 4700)) == Approx(score(mix, untracked_poor, share(470, 4700))));
  // Where the CPU is short anyway, a share that uses GPU room without taking CPU strands less.
  const Node short_cpu = shares_node("short", 48000, 44000, 4);
  CHECK(score(mix, short_cpu, share(470, 0)) > score(mix, short_cpu, share(470, 4000)));
  // A cost in milli, not a tie-break: on the poor node a 530 gap the 470 nearly fills (60 dead,
  // 20 more waste than the live gap's 40) loses to a fresh GPU on the rich node (40 + 50 for
  // opening it), since 270 more milli of its GPU room go without CPU. Without CPU tracking the
  // gap wins.
  const Node poor_gap = shares_node("poor-gap", 48000, 27300, 4, {470});
  CHECK(score(mix, rich, heavy) > score(mix, poor_gap, heavy));
  Node untracked_gap = poor_gap;
  untracked_gap.host = {0, 1 << 20};
  untracked_gap.host_used = {0, 0};
  CHECK(score(mix, untracked_gap, heavy) > score(mix, rich, heavy));
  // Without a CPU per GPU milli in the mix (a mix built by hand) the term is off.
  WorkloadMix no_cpu = mix;
  no_cpu.cpu_per_gpu_milli = 0;
  CHECK(score(no_cpu, rich, heavy) == score(no_cpu, poor, heavy));
}

TEST_CASE("gapless: GPU room stranded for want of CPU counts for the demand that can use it",
          "[placement][gapless]") {
  // The case above where the rich node's fresh GPU (90 milli of waste) beats the poor node's 530
  // gap (20 of waste, 270 more milli of room left without CPU) ...
  WorkloadMix mix = shares_mix();
  const GpuRequest heavy = share(470, 8000);
  const Node rich = shares_node("rich", 48000, 0, 4);
  const Node poor_gap = shares_node("poor-gap", 48000, 27300, 4, {470});
  CHECK(score(mix, rich, heavy) > score(mix, poor_gap, heavy));
  // ... turns when 80 % of the GPU demand names a model the nodes lack (V100): room left on T4s
  // is worth only to the other 20 %, so the poor node's 270 count 54 and the gap wins.
  mix.model_demand = {{"v100", 0.8}};
  CHECK(score(mix, poor_gap, heavy) > score(mix, rich, heavy));
  // Demand naming T4 itself can use the room: all of it counts again.
  mix.model_demand = {{"t4", 0.8}};
  CHECK(score(mix, rich, heavy) > score(mix, poor_gap, heavy));
}
