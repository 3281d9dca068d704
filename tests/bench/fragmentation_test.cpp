// The fragmentation measure of docs/packing-benchmark.md §2.2-2.3 on hand-computed nodes, the
// cache that keeps it current, and the typical-pod mix of §2.1.
#include <catch2/catch.hpp>
#include <vector>

#include "bench_nodes.h"
#include "gapless/placement/fragmentation.h"
#include "gapless/placement/workload.h"

using namespace gapless;
using namespace gapless::bench::testing;
using placement::TaskShape;
using placement::WorkloadMix;

namespace {

// 4 T4s with 1000, 600, 300 and 0 milli left (idle 1900); 8 of 32 cores left.
model::Node node_a() {
  return node_with("a", 32000, 4, {0, 400, 700, 1000}, 24000);
}

TaskShape task(int milli, int gpus, std::int64_t cpu, std::vector<std::string> models = {}) {
  return TaskShape{cpu, milli, gpus, std::move(models)};
}

}  // namespace

TEST_CASE("F_n(m) for every class of node against task", "[bench][fragmentation]") {
  const model::Node a = node_a();
  // q3: fits; the GPUs with less than 500 left (300 + 0) are fragment.
  CHECK(placement::task_fragment(a, task(500, 1, 4000)) == 300);
  // q3 with a model list that admits T4.
  CHECK(placement::task_fragment(a, task(500, 1, 4000, {"V100M16", "T4"})) == 300);
  // q2: only one GPU with 1000 left for a 2-GPU task: all idle GPU is fragment.
  CHECK(placement::task_fragment(a, task(1000, 2, 4000)) == 1900);
  // q4: GPUs fit but 16 cores are not left.
  CHECK(placement::task_fragment(a, task(200, 1, 16000)) == 1900);
  // q1: neither.
  CHECK(placement::task_fragment(a, task(1000, 2, 16000)) == 1900);
  // xl / xr: a task without GPUs counts all idle GPU as fragment, CPU or not.
  CHECK(placement::task_fragment(a, task(0, 0, 4000)) == 1900);
  CHECK(placement::task_fragment(a, task(0, 0, 64000)) == 1900);
  // no_access: the task does not accept T4.
  CHECK(placement::task_fragment(a, task(500, 1, 4000, {"V100M16"})) == 1900);
  // q3 where every GPU with room fits: no fragment but the full GPU's 0.
  CHECK(placement::task_fragment(a, task(300, 1, 4000)) == 0);
}

TEST_CASE("F_n(M) is the mix-weighted sum", "[bench][fragmentation]") {
  const model::Node a = node_a();
  WorkloadMix mix;
  mix.entries = {{task(500, 1, 4000), 0.5}, {task(1000, 2, 4000), 0.25}, {task(0, 0, 4000), 0.25}};
  CHECK(placement::node_fragment(a, mix) == Approx(0.5 * 300 + 0.25 * 1900 + 0.25 * 1900));

  // After a 500-milli share with 4 cores on GPU 1 (600 -> 100): the 500 task still fits GPU 0,
  // fragment 100 + 300 + 0; idle 1400.
  const auto req = share(500, 4000);
  const int gpu1[] = {1};
  CHECK(placement::node_fragment_after(a, mix, req, gpu1) ==
        Approx(0.5 * 400 + 0.25 * 1400 + 0.25 * 1400));
  // A CPU-only pod taking the last 8 cores: every GPU task now lacks CPU.
  CHECK(placement::node_fragment_after(a, mix, cpu_only(8000), {}) == Approx(1900));
}

TEST_CASE("the fragment cache updates one node and the cluster total", "[bench][fragmentation]") {
  WorkloadMix mix;
  mix.entries = {{task(500, 1, 0), 1.0}};
  model::Node a = node_a(), b = node_with("b", 32000, 2, {});
  const model::Node* nodes[] = {&a, &b};
  placement::FragmentCache cache(mix);
  cache.rebuild(nodes);
  CHECK(cache.fragment(a) == 300);
  CHECK(cache.fragment(b) == 0);
  CHECK(cache.total() == 300);
  b.gpus[0].used.compute_used_milli = 800;  // 200 left: too little for 500
  b.gpus[0].used.shared_pods = 1;
  CHECK(cache.fragment(b) == 0);  // not updated yet
  cache.update(b);
  CHECK(cache.fragment(b) == 200);
  CHECK(cache.total() == 500);
  const int gpu0[] = {0};
  CHECK(cache.fragment_after(a, share(500), gpu0) == 300);  // 1000 -> 500: still fits
}

TEST_CASE("remix after a mix change equals a fresh rebuild under the new mix",
          "[bench][fragmentation]") {
  WorkloadMix mix;
  mix.entries = {{task(500, 1, 0), 1.0}};
  model::Node a = node_a(), b = node_with("b", 32000, 2, {}),
              c = node_with("c", 32000, 2, {0, 900});
  const model::Node* nodes[] = {&a, &b, &c};
  placement::FragmentCache cache(mix);
  cache.rebuild(nodes);
  // The mix moves (the cache reads it through its pointer): two shapes, one restricted to T4,
  // and a multi-GPU shape only few nodes take.
  mix.entries = {{task(300, 1, 4000, {"T4"}), 0.5}, {task(1000, 2, 8000), 0.5}};
  mix.model_demand = {{"t4", 0.4}};
  mix.multi_gpu_shapes = {{task(1000, 4, 0), 0.1}};
  cache.remix();
  placement::FragmentCache fresh(mix);
  fresh.rebuild(nodes);
  for (const model::Node* n : nodes) {
    CHECK(cache.fragment(*n) == fresh.fragment(*n));
    CHECK(cache.stranding(*n) == fresh.stranding(*n));
    const auto mine = cache.model_reserves(*n), theirs = fresh.model_reserves(*n);
    CHECK(std::vector<float>(mine.begin(), mine.end()) ==
          std::vector<float>(theirs.begin(), theirs.end()));
    const int gpu0[] = {0};
    CHECK(cache.breaks_scarce_host(*n, share(500), gpu0) ==
          fresh.breaks_scarce_host(*n, share(500), gpu0));
  }
  CHECK(cache.total() == Approx(fresh.total()));
  CHECK(cache.stranding(b) != 0);  // the new mix did change something (0 under the old)
}

TEST_CASE("the typical mix takes the most common shapes up to the coverage", "[bench][workload]") {
  placement::ShapeCounts counts;
  counts[task(500, 1, 4000)] = 5;
  counts[task(1000, 1, 8000)] = 3;  // ties with the next: the larger shape first
  counts[task(1000, 1, 2000)] = 3;
  counts[task(0, 0, 1000)] = 1;
  const WorkloadMix mix = placement::typical_mix(counts, 0.9);  // needs 10.8 of 12 pods
  REQUIRE(mix.entries.size() == 3);
  CHECK(mix.entries[0].shape == task(500, 1, 4000));
  CHECK(mix.entries[1].shape == task(1000, 1, 8000));
  CHECK(mix.entries[2].shape == task(1000, 1, 2000));
  CHECK(mix.entries[0].weight == Approx(5.0 / 11));
  CHECK(mix.entries[1].weight == Approx(3.0 / 11));
  CHECK(placement::typical_mix(counts, 0.95).entries.size() == 4);
}

TEST_CASE("the learner rebuilds its mix at 1, 2, 4, 8 ... pods", "[bench][workload]") {
  placement::WorkloadLearner learner;
  std::vector<std::size_t> rebuilt;
  for (std::size_t i = 1; i <= 20; ++i) {
    if (learner.observe(task(i % 3 == 0 ? 1000 : 500, 1, 0))) rebuilt.push_back(i);
  }
  CHECK(rebuilt == std::vector<std::size_t>{1, 2, 4, 8, 16});
  CHECK(learner.observed() == 20);
  REQUIRE(learner.mix().entries.size() == 2);
  CHECK(learner.mix().entries[0].shape.milli == 500);  // 11 of the first 16
  CHECK(learner.mix().entries[0].weight == Approx(11.0 / 16));
}

TEST_CASE("a request's shape", "[bench][workload]") {
  CHECK(placement::shape_of(share(470, 6000, {"T4"})) == task(470, 1, 6000, {"T4"}));
  CHECK(placement::shape_of(whole(4, 32000)) == task(1000, 4, 32000));
  CHECK(placement::shape_of(cpu_only(2000)) == task(0, 0, 2000));
}
