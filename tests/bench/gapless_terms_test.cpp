// The gapless strategy's cluster-aware terms (issue 11): the model term and the keep-whole
// term, and what the learned mix records for them.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "bench_nodes.h"
#include "gapless/placement/engine.h"
#include "gapless/placement/fragmentation.h"
#include "gapless/placement/scheduler.h"
#include "gapless/placement/strategy.h"
#include "gapless/placement/workload.h"

using namespace gapless;
using namespace gapless::bench::testing;
using placement::FragmentCache;
using placement::TaskShape;
using placement::WorkloadMix;

namespace {

TaskShape task(int milli, int gpus, std::int64_t cpu, std::vector<std::string> models = {}) {
  TaskShape t{cpu, milli, gpus, std::move(models)};
  return t;
}

std::vector<const model::Node*> pointers(const std::vector<model::Node>& nodes) {
  std::vector<const model::Node*> out;
  for (const model::Node& n : nodes) out.push_back(&n);
  return out;
}

placement::ScoreContext with(const WorkloadMix& mix, const FragmentCache& cache) {
  placement::ScoreContext ctx;
  ctx.workload = &mix;
  ctx.fragments = &cache;
  return ctx;
}

const placement::Strategy& gapless_strategy() {
  return *placement::find_strategy("gapless");
}

// A 2-GPU T4 node and an 8-GPU G2 node, 96 cores each, `g2_cpu_used` of the G2's taken.
std::vector<model::Node> t4_and_g2(std::int64_t g2_cpu_used) {
  return {node_with("t4", 96000, 2, {}, 0, "T4"), node_with("g2", 96000, 8, {}, g2_cpu_used, "G2")};
}

// 85 whole GPUs naming no model, 15 naming T4 only; 8 cores each.
placement::ShapeCounts t4_pinned_counts() {
  placement::ShapeCounts counts;
  counts[task(1000, 1, 8000)] = 85;
  counts[task(1000, 1, 8000, {"T4"})] = 15;
  return counts;
}

}  // namespace

TEST_CASE("the mix keeps model-restricted demand and multi-GPU shapes, rare ones too",
          "[bench][workload]") {
  placement::ShapeCounts counts;
  counts[task(1000, 1, 8000)] = 90;                       // 90 GPUs, any model
  counts[task(500, 1, 4000, {"T4"})] = 8;                 // 4 GPUs' worth, T4 only
  counts[task(1000, 2, 8000, {"t4", "V100", "T4"})] = 1;  // 2 GPUs, T4 or V100 (duplicates once)
  counts[task(1000, 8, 120000)] = 1;                      // 8 GPUs
  const WorkloadMix mix = placement::typical_mix(counts, 0.9);
  CHECK(mix.entries.size() == 1);         // the rare shapes fall out of the entries ...
  REQUIRE(mix.model_demand.size() == 2);  // ... but not out of these
  CHECK(mix.model_demand[0].first == "t4");
  CHECK(mix.model_demand[0].second == Approx((4.0 + 1.0) / 104));
  CHECK(mix.model_demand[1].first == "v100");
  CHECK(mix.model_demand[1].second == Approx(1.0 / 104));
  REQUIRE(mix.multi_gpu_shapes.size() == 2);
  CHECK(mix.multi_gpu_shapes[0].first.gpus == 2);
  CHECK(mix.multi_gpu_shapes[1].first == task(1000, 8, 120000));
  CHECK(mix.multi_gpu_shapes[1].second == Approx(1.0 / 100));
  // GPU demand: 90 + 4 + 2 + 8 GPUs, of which 2 + 8 ask several GPUs.
  CHECK(mix.multi_gpu_demand == Approx(10.0 / 104));
  // Whole-GPU pods: 90 x 8 + 8 + 120 cores over 90 + 2 + 8 GPUs; the shares do not count.
  CHECK(mix.cpu_per_whole_gpu == Approx(8480));
}

TEST_CASE("the learner also rebuilds when a multi-GPU shape is first seen", "[bench][workload]") {
  placement::WorkloadLearner learner;
  std::vector<std::size_t> rebuilt;
  for (std::size_t i = 1; i <= 12; ++i) {
    const TaskShape shape = i == 5 || i == 6 ? task(1000, 8, 64000) : task(500, 1, 4000);
    if (learner.observe(shape)) rebuilt.push_back(i);
  }
  CHECK(rebuilt == std::vector<std::size_t>{1, 2, 4, 5, 8});  // 5: new; 6: seen before
  REQUIRE(learner.mix().multi_gpu_shapes.size() == 1);
}

TEST_CASE("model term: pods naming no model keep off the model restricted pods need",
          "[bench][gapless]") {
  // 2 T4 GPUs of 10: T4 is 20 % of the GPUs; the T4-only pods ask 15 % of all GPU demand, so
  // T4 is needed at 0.75 of its share, 0.60 more than an even share (0.15) of every GPU.
  const std::vector<model::Node> nodes = t4_and_g2(0);
  const placement::ShapeCounts counts = t4_pinned_counts();
  const WorkloadMix mix = placement::typical_mix(counts);
  FragmentCache cache(mix);
  cache.rebuild(pointers(nodes));
  const auto t4 = cache.model_reserves(nodes[0]);
  REQUIRE(t4.size() == 2);
  CHECK(t4[0] == Approx(0.60));
  CHECK(t4[1] == Approx(0.60));
  const auto g2 = cache.model_reserves(nodes[1]);
  CHECK(g2.size() == 8);
  CHECK(std::all_of(g2.begin(), g2.end(), [](float r) { return r == 0; }));  // nobody wants G2
  const auto ctx = with(mix, cache);
  const auto& s = gapless_strategy();
  // Unrestricted: the T4 costs 0.25 x 0.60 x 1000 milli more than the G2.
  CHECK(s.score_node_in(ctx, nodes[1], whole(1, 8000)) >
        s.score_node_in(ctx, nodes[0], whole(1, 8000)));
  CHECK(s.score_node_in(ctx, nodes[1], share(500)) > s.score_node_in(ctx, nodes[0], share(500)));
  // A pod restricted to T4 pays nothing for it.
  const placement::ScoreContext no_cache{&mix, nullptr};
  CHECK(s.score_node_in(ctx, nodes[0], share(500, 0, {"T4"})) ==
        s.score_node_in(no_cache, nodes[0], share(500, 0, {"T4"})));
  // No restricted pods seen: no term.
  placement::ShapeCounts plain;
  plain[task(1000, 1, 8000)] = 1;
  const WorkloadMix plain_mix = placement::typical_mix(plain);
  FragmentCache plain_cache(plain_mix);
  plain_cache.rebuild(pointers(nodes));
  CHECK(plain_cache.model_reserves(nodes[0]).empty());
  // Pods naming G2 ask 70 % more: T4's 0.75 is less than the 0.85 of every GPU that pods naming
  // some model ask, so nobody crowds T4 and it reserves nothing; G2 0.875 - 0.85.
  placement::ShapeCounts crowded = counts;
  crowded[task(1000, 1, 8000)] = 15;
  crowded[task(1000, 1, 8000, {"G2"})] = 70;
  const WorkloadMix crowded_mix = placement::typical_mix(crowded);
  FragmentCache crowded_cache(crowded_mix);
  crowded_cache.rebuild(pointers(nodes));
  CHECK(crowded_cache.model_reserves(nodes[0])[0] == Approx(0.0));
  CHECK(crowded_cache.model_reserves(nodes[1])[0] == Approx(0.025));
}

TEST_CASE("model term: a CPU-heavy share keeps off a crowded model's CPU-rich node",
          "[bench][gapless]") {
  // T4 reserved at 0.60 as above. The G2 has 50 cores left for 8,000 milli of idle GPU room at
  // the mix's 8 CPU milli per GPU milli: a 500 asking 8 cores leaves 500 more milli of its room
  // without CPU (425 counted: 85 % of the demand can use a G2). On the T4 (48 cores a GPU) it
  // strands nothing but takes 500 milli of the GPUs the T4-only pods need: 0.60 x 500 at the
  // share rule's weight 2 is 600; at the whole-GPU rule's 0.25 it would be 75 and the T4 would win.
  const std::vector<model::Node> nodes = t4_and_g2(46000);
  const WorkloadMix mix = placement::typical_mix(t4_pinned_counts());
  FragmentCache cache(mix);
  cache.rebuild(pointers(nodes));
  const auto ctx = with(mix, cache);
  const auto& s = gapless_strategy();
  CHECK(s.score_node_in(ctx, nodes[1], share(500, 8000)) >
        s.score_node_in(ctx, nodes[0], share(500, 8000)));
  // A share asking CPU at the mix's rate strands no more room on the G2 than it takes: the G2.
  CHECK(s.score_node_in(ctx, nodes[1], share(500, 4000)) >
        s.score_node_in(ctx, nodes[0], share(500, 4000)));
}

TEST_CASE("keep-whole term: a scarce host of a big shape stays whole while others fit",
          "[bench][gapless]") {
  // Two nodes of 128 cores among 40 of 96: only they take 8 GPUs with 120 cores (2 of 42 < 5 %).
  std::vector<model::Node> nodes;
  nodes.push_back(node_with("big", 128000, 8, {}, 0, "G3"));
  for (int i = 0; i < 40; ++i) nodes.push_back(node_with("n" + std::to_string(i), 96000, 8, {}));
  nodes.push_back(node_with("used", 128000, 8, {1000}, 0, "G3"));  // a host already broken
  placement::ShapeCounts counts;
  counts[task(1000, 1, 8000)] = 99;
  counts[task(1000, 8, 120000)] = 1;
  const WorkloadMix mix = placement::typical_mix(counts);
  FragmentCache cache(mix);
  cache.rebuild(pointers(nodes));
  const int gpu0[] = {0};
  CHECK(cache.breaks_scarce_host(nodes[0], whole(1, 8000), gpu0));
  CHECK(cache.breaks_scarce_host(nodes[0], cpu_only(16000), {}));             // its cores count too
  CHECK_FALSE(cache.breaks_scarce_host(nodes[0], cpu_only(4000), {}));        // 124 cores left
  CHECK_FALSE(cache.breaks_scarce_host(nodes[1], whole(1, 8000), gpu0));      // not a host
  CHECK_FALSE(cache.breaks_scarce_host(nodes.back(), whole(1, 8000), gpu0));  // already broken
  const auto ctx = with(mix, cache);
  const auto& s = gapless_strategy();
  CHECK(s.score_node_in(ctx, nodes[1], cpu_only(16000)) >
        s.score_node_in(ctx, nodes[0], cpu_only(16000)));
  CHECK(s.score_node_in(ctx, nodes[1], share(500)) > s.score_node_in(ctx, nodes[0], share(500)));
  // The big pod itself still goes there (nothing else fits it; its score is not zeroed).
  CHECK(s.score_node_in(ctx, nodes[0], whole(8, 120000)) > 0.0);
}

namespace {

// Whole 1-GPU pods of 12 cores and shares of 4; `multi` 8-GPU pods per 100 of those.
WorkloadMix cpu_mix(double multi = 0, bool whole_pods = true) {
  placement::ShapeCounts counts;
  if (whole_pods) counts[task(1000, 1, 12000)] = 60;
  counts[task(470, 1, 4000)] = 40;
  if (multi > 0) counts[task(1000, 8, 96000)] = multi;
  return placement::typical_mix(counts);
}

}  // namespace

TEST_CASE("share ties: a node short of CPU for its idle GPUs ranks lower", "[bench][gapless]") {
  const WorkloadMix mix = cpu_mix();
  REQUIRE(mix.cpu_per_whole_gpu == Approx(12000));
  const placement::ScoreContext ctx{&mix, nullptr};
  const auto& s = gapless_strategy();
  // Both open a fresh GPU. After it: 7 idle GPUs need 84 cores; `rich` has 84 left, `poor` 64.
  // Since the CPU-stranded room term (issue 42) a share asking more CPU per milli than the mix
  // (12 cores for 470, the mix 11.2 per 1,000) is what avoids the poor node; one asking less
  // uses GPU room the poor node's CPU would leave idle anyway, and is welcome there.
  const model::Node rich = node_with("rich", 96000, 8, {});
  const model::Node poor = node_with("poor", 96000, 8, {}, 20000);
  CHECK(s.score_node_in(ctx, rich, share(470, 12000)) >
        s.score_node_in(ctx, poor, share(470, 12000)));
  CHECK(s.score_node_in(ctx, poor, share(470, 4000)) >
        s.score_node_in(ctx, rich, share(470, 4000)));
  // Among nodes both short of CPU (the same CPU-stranded room added), the tie-break: the further
  // short, the lower.
  const model::Node poorer = node_with("poorer", 96000, 8, {}, 30000);
  CHECK(s.score_node_in(ctx, poor, share(470, 4000)) >
        s.score_node_in(ctx, poorer, share(470, 4000)));
  // A tie-break only: less waste still wins (a 530 gap the share fills exactly beats a fresh GPU).
  const model::Node gap = node_with("gap", 96000, 8, {530}, 30000);
  CHECK(s.score_node_in(ctx, gap, share(470, 4000)) > s.score_node_in(ctx, rich, share(470, 4000)));
}

TEST_CASE("share ties: a share opening a GPU goes where fewer GPUs are partly used",
          "[bench][gapless]") {
  // 190 left beside an 810: the 470 share cannot use it and opens a fresh GPU on either node.
  const model::Node two = node_with("two", 96000, 8, {810, 810});
  const model::Node one = node_with("one", 96000, 8, {810});
  const auto& s = gapless_strategy();
  const WorkloadMix mix = cpu_mix();
  const placement::ScoreContext ctx{&mix, nullptr};
  CHECK(s.score_node_in(ctx, one, share(470, 4000)) > s.score_node_in(ctx, two, share(470, 4000)));
  // Multi-GPU pods asking a fifth of the demand need empty nodes: no preference.
  const WorkloadMix multi = cpu_mix(2);
  REQUIRE(multi.multi_gpu_demand > 0.15);
  const placement::ScoreContext multi_ctx{&multi, nullptr};
  CHECK(s.score_node_in(multi_ctx, one, share(470, 4000)) ==
        s.score_node_in(multi_ctx, two, share(470, 4000)));
  // Shares alone: nothing to strand, no preference.
  const WorkloadMix shares = cpu_mix(0, false);
  REQUIRE(shares.cpu_per_whole_gpu == 0);
  const placement::ScoreContext shares_ctx{&shares, nullptr};
  CHECK(s.score_node_in(shares_ctx, one, share(470, 4000)) ==
        s.score_node_in(shares_ctx, two, share(470, 4000)));
}

namespace {

constexpr int kUsedNodes = 12;

// kUsedNodes used nodes (one 810 share each, 7 idle GPUs) and `empty` nodes with nothing on
// them, 8 T4s each; the empty ones last.
std::vector<model::Node> used_and_empty(int empty) {
  std::vector<model::Node> nodes;
  for (int i = 0; i < kUsedNodes; ++i)
    nodes.push_back(node_with("used-" + std::to_string(i), 96000, 8, {810}));
  for (int i = 0; i < empty; ++i)
    nodes.push_back(node_with("empty-" + std::to_string(i), 96000, 8, {}));
  return nodes;
}

}  // namespace

TEST_CASE("fragment cache: the empty hosts are spared while they hold the multi-GPU pods' part",
          "[bench][gapless]") {
  const WorkloadMix mix = cpu_mix(1);  // 8-GPU pods ask 8000 of 86800 milli: 9.2 % of the demand
  REQUIRE(mix.multi_gpu_demand == Approx(8000.0 / 86800));
  std::vector<model::Node> nodes = used_and_empty(3);
  FragmentCache cache(mix);
  cache.rebuild(pointers(nodes));
  // Empty hosts' GPUs against 9.2 % of the idle GPUs (84 on the used nodes, and theirs).
  CHECK(cache.empty_hosts_to_spare());  // 24 > 9.2 % of 108
  nodes[13].gpus[3].used.whole = true;
  cache.update(nodes[13]);
  CHECK(cache.empty_hosts_to_spare());  // 16 > 9.2 % of 107
  nodes[14].gpus[0].used.shared_pods = 1;
  cache.update(nodes[14]);
  CHECK_FALSE(cache.empty_hosts_to_spare());  // 8 < 9.2 % of 106 = 9.8
  nodes[14].gpus[0].used.shared_pods = 0;     // that share left
  cache.update(nodes[14]);
  CHECK(cache.empty_hosts_to_spare());
  // Nodes that left count no more: an empty host (8 < 9.2 % of 99), then two used nodes (8 >
  // 9.2 % of 85).
  cache.erase(&nodes[14]);
  CHECK_FALSE(cache.empty_hosts_to_spare());
  cache.erase(&nodes[0]);
  cache.erase(&nodes[1]);
  CHECK(cache.empty_hosts_to_spare());
  // A one-GPU node is no host for a multi-GPU pod, empty or not.
  const std::vector<model::Node> small = {node_with("one", 16000, 1, {}),
                                          node_with("u", 96000, 8, {810})};
  FragmentCache small_cache(mix);
  small_cache.rebuild(pointers(small));
  CHECK_FALSE(small_cache.empty_hosts_to_spare());
}

TEST_CASE("share ties: a share opens an empty host only while the empty hosts are to spare",
          "[bench][gapless]") {
  const WorkloadMix mix = cpu_mix(1);
  REQUIRE(mix.multi_gpu_demand < 0.15);  // the spread is on
  const auto& s = gapless_strategy();
  const auto share470 = share(470, 4000);
  // Plenty of empty hosts: the empty one first (fewest partly used GPUs), as before.
  const std::vector<model::Node> plenty = used_and_empty(3);
  FragmentCache plenty_cache(mix);
  plenty_cache.rebuild(pointers(plenty));
  const auto plenty_ctx = with(mix, plenty_cache);
  CHECK(s.score_node_in(plenty_ctx, plenty[kUsedNodes], share470) >
        s.score_node_in(plenty_ctx, plenty[0], share470));
  // One left (8 GPUs, 92 idle): the share opens a GPU on a used node, the empty host stays whole.
  const std::vector<model::Node> few = used_and_empty(1);
  FragmentCache few_cache(mix);
  few_cache.rebuild(pointers(few));
  REQUIRE_FALSE(few_cache.empty_hosts_to_spare());
  const auto few_ctx = with(mix, few_cache);
  CHECK(s.score_node_in(few_ctx, few[0], share470) >
        s.score_node_in(few_ctx, few[kUsedNodes], share470));
  // Still a tie-break: a gap the share fills beats either.
  const model::Node gap = node_with("gap", 96000, 8, {530, 530});
  CHECK(s.score_node_in(few_ctx, gap, share470) > s.score_node_in(few_ctx, few[0], share470));
}

namespace {

// Puts a share of `milli` on `node` the way a bound pod takes it (node_with's usage is not an
// allocation, and the cluster model keeps usage by its allocations).
void put_share(model::Cluster& c, const std::string& node, int milli, const std::string& uid) {
  model::PodInfo pod;
  pod.ns = "t";
  pod.name = pod.uid = uid;
  const auto a =
      placement::place(c, share(milli, 4000), placement::builtin_policy().profiles[0], pod, node);
  REQUIRE(a);
  REQUIRE(c.commit(*a));
}

}  // namespace

TEST_CASE("scheduler: cached scores follow the empty hosts running short", "[bench][gapless]") {
  const WorkloadMix mix = cpu_mix(1);
  model::Cluster cluster;
  for (model::Node& n : used_and_empty(3)) {
    for (model::Gpu& g : n.gpus) g.used = {};
    cluster.upsert_node(std::move(n));
  }
  for (int i = 0; i < kUsedNodes; ++i)
    put_share(cluster, "used-" + std::to_string(i), 810, "u" + std::to_string(i));
  placement::SchedulerOptions options;
  options.fixed_mix = &mix;
  placement::Scheduler sched(std::move(cluster), placement::builtin_policy(), options);
  const auto loaded = sched.policy();
  const placement::Profile& profile = loaded->policy.profiles[0];
  const std::vector<std::string> names = {"used-0", "empty-0"};
  const auto share470 = share(470, 4000);
  const std::vector<double> before = sched.score(*loaded, share470, profile, names);
  CHECK(before[1] > before[0]);
  // Shares land on the two other empty hosts; empty-0 itself does not change.
  sched.mutate([](model::Cluster& c) {
    put_share(c, "empty-1", 470, "e1");
    put_share(c, "empty-2", 470, "e2");
  });
  const std::vector<double> after = sched.score(*loaded, share470, profile, names);
  CHECK(after[0] > after[1]);
  CHECK(after[1] < before[1]);  // not the score cached before for the unchanged node
}
