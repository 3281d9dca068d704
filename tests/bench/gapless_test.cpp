// Gapless's own strategy: stranding (fragmentation.h) and its two placement rules, on
// hand-computed nodes.
#include <catch2/catch.hpp>

#include "bench_nodes.h"
#include "gapless/placement/choice.h"
#include "gapless/placement/fragmentation.h"
#include "gapless/placement/strategy.h"

using namespace gapless;
using namespace gapless::bench::testing;
using placement::TaskShape;
using placement::WorkloadMix;

namespace {

const placement::Strategy& gapless_strategy() {
  return *placement::find_strategy("gapless");
}

placement::ScoreContext with(const WorkloadMix& mix) {
  placement::ScoreContext ctx;
  ctx.workload = &mix;
  return ctx;
}

}  // namespace

TEST_CASE("stranding counts what pods of a shape leave unused, one after another",
          "[bench][gapless]") {
  const model::Node empty = node_with("g2", 96000, 8, {});
  CHECK(placement::task_stranding(empty, {8000, 1000, 1, {}}) == 0);      // 8 fit
  CHECK(placement::task_stranding(empty, {16000, 1000, 1, {}}) == 2000);  // CPU for 6
  // 8 idle GPUs beside 16 free cores: two 8-core pods fit, 6 GPUs stranded. F_n(m) sees none.
  const model::Node cpu_bound = node_with("c", 96000, 8, {}, 80000);
  CHECK(placement::task_stranding(cpu_bound, {8000, 1000, 1, {}}) == 6000);
  CHECK(placement::task_fragment(cpu_bound, {8000, 1000, 1, {}}) == 0);
  // Shares repeat per GPU: 1000, 680 and 190 left hold 3 + 2 + 0 pods of 320.
  const model::Node shares = node_with("s", 96000, 3, {0, 320, 810});
  CHECK(placement::task_stranding(shares, {0, 320, 1, {}}) == 1870 - 5 * 320);
  // Memory bounds too (node_with gives 1 TiB): 400 GiB pods, two fit.
  TaskShape big{1000, 1000, 1, {}};
  big.memory_mib = 400 << 10;
  CHECK(placement::task_stranding(empty, big) == 6000);
  // No GPUs asked, or a model the node lacks: all idle GPU.
  CHECK(placement::task_stranding(empty, {1000, 0, 0, {}}) == 8000);
  CHECK(placement::task_stranding(empty, {1000, 500, 1, {"V100"}}) == 8000);
  // Whole-GPU shapes need whole GPUs: a 2-GPU shape on 3 free GPUs and a share.
  const model::Node part = node_with("p", 96000, 4, {500});
  CHECK(placement::task_stranding(part, {1000, 1000, 2, {}}) == 3500 - 2000);
}

TEST_CASE("gapless: a share takes the GPU that adds the least dead room", "[bench][gapless]") {
  WorkloadMix mix;  // shares: 3 % are 160, the rest 320 and 470 -> gaps under 320 are dead
  mix.entries = {{{0, 320, 1, {}}, 0.5}, {{0, 470, 1, {}}, 0.5}};
  mix.share_sizes = {{160, 0.03}, {320, 0.5}, {470, 0.47}};
  const auto ctx = with(mix);
  // 1000 (fresh), 680, 530 and 350 milli left.
  const model::Node n = node_with("n", 96000, 4, {0, 320, 470, 650});
  const auto& s = gapless_strategy();
  // 320 into 350 leaves 30 dead (waste 30 - 40 live), into 680 leaves 360 live (0), into 530
  // leaves 210 dead (170), into the fresh GPU 680 live (40 + 50 for opening it).
  CHECK(s.score_gpu_in(ctx, n, n.gpus[3], share(320)) == Approx((2000.0 + 10) / 3000));
  CHECK(s.score_gpu_in(ctx, n, n.gpus[1], share(320)) == Approx(2000.0 / 3000));
  CHECK(s.score_gpu_in(ctx, n, n.gpus[2], share(320)) == Approx((2000.0 - 170) / 3000));
  CHECK(s.score_gpu_in(ctx, n, n.gpus[0], share(320)) == Approx((2000.0 - 90) / 3000));
  CHECK(s.score_node_in(ctx, n, share(320)) == Approx((2000.0 + 10) / 3000));
  // Without the 350 gap, best fit would leave 210 in the 530 gap; gapless keeps it for a 470.
  const model::Node m = node_with("m", 96000, 4, {0, 320, 470, 1000});
  placement::Profile p;
  p.node = {{&s, 1.0}};
  p.gpu = {{&s, 1.0}};
  p.gpu_weight = 0;
  p.context = ctx;
  auto pick = placement::choose(m, share(320), p);
  REQUIRE(pick.has_value());
  CHECK(pick->gpus.at(0).index == 1);
  // A 160 closes the 190 next to an 810: dead room shrinks by 160.
  const model::Node gap = node_with("g", 96000, 2, {810});
  CHECK(s.score_gpu_in(ctx, gap, gap.gpus[0], share(160)) == Approx((2000.0 + 160) / 3000));
}

TEST_CASE("gapless: whole GPUs and CPU-only pods go where the least is stranded",
          "[bench][gapless]") {
  WorkloadMix mix;  // 1-GPU pods asking 16 cores each
  mix.entries = {{{16000, 1000, 1, {}}, 1.0}};
  const auto ctx = with(mix);
  const model::Node g2 = node_with("g2", 96000, 8, {});  // CPU for 6 such pods: 2000 stranded
  const model::Node t4 = node_with("t4", 104000, 2, {});
  const auto& s = gapless_strategy();
  // 32 cores on the G2 leave CPU for 4: 2000 more stranded -> int(100 sigmoid(-2)) = 11.
  CHECK(s.score_node_in(ctx, g2, cpu_only(32000)) == 0.11);
  CHECK(s.score_node_in(ctx, t4, cpu_only(32000)) == 0.50);  // still CPU for both GPUs
  // FGD, one pod ahead, sees no difference: both nodes still fit the next pod.
  const auto& fgd = *placement::find_strategy("fgd");
  CHECK(fgd.score_node_in(ctx, g2, cpu_only(32000)) == fgd.score_node_in(ctx, t4, cpu_only(32000)));
  // A 1-GPU pod with 16 cores: no change in stranding on either (delta 0).
  CHECK(s.score_node_in(ctx, g2, whole(1, 16000)) == 0.50);
}

TEST_CASE("gapless without a mix judges by the request's own shape", "[bench][gapless]") {
  const model::Node n = node_with("n", 96000, 2, {0, 600});
  const auto& s = gapless_strategy();
  CHECK(s.score_node(n, share(400)) > 0.0);
  CHECK(s.score_gpu(n, n.gpus[1], share(400)) > s.score_gpu(n, n.gpus[0], share(400)));
  CHECK(s.score_node(n, whole(1, 1000)) >= 0.0);
}
