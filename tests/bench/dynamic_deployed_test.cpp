// The dynamic replay as deployed (deployed.h, replay_dynamic_deployed): the dynamic queue with
// every attempt a kube-scheduler cycle, departures and Unschedulable conditions reaching the
// extender as its pod informer would see them.
#include <catch2/catch.hpp>

#include <map>
#include <string>
#include <vector>

#include "bench_nodes.h"
#include "bench_policies.h"
#include "deployed.h"
#include "gapless/placement/strategy.h"
#include "gapless/policy/loader.h"
#include "report.h"
#include "sweep.h"

using namespace gapless;
using namespace gapless::bench;
using namespace gapless::bench::testing;

namespace {

// Passes every call on, counting the extender's filter calls per pod name.
class CountingFilter : public ExtenderPort {
 public:
  explicit CountingFilter(std::unique_ptr<ExtenderPort> inner) : inner_(std::move(inner)) {}
  bool filter(const TracePod& p, const std::string& uid, const std::vector<std::string>& nodes,
              std::vector<std::string>* passed) override {
    ++filtered[p.name];
    return inner_->filter(p, uid, nodes, passed);
  }
  bool prioritize(const TracePod& p, const std::string& uid, const std::vector<std::string>& nodes,
                  std::vector<int>* scores) override {
    return inner_->prioritize(p, uid, nodes, scores);
  }
  bool bind(const TracePod& p, const std::string& uid, const std::string& node,
            std::int64_t* granted) override {
    return inner_->bind(p, uid, node, granted);
  }
  void bound_elsewhere(const TracePod& p, const std::string& uid,
                       const std::string& node) override {
    inner_->bound_elsewhere(p, uid, node);
  }
  void deleted(const std::string& uid) override {
    ++deletions;
    inner_->deleted(uid);
  }
  void unschedulable(const TracePod& p, const std::string& uid) override {
    inner_->unschedulable(p, uid);
  }
  std::map<std::string, int> filtered;
  int deletions = 0;

 private:
  std::unique_ptr<ExtenderPort> inner_;
};

}  // namespace

TEST_CASE("as deployed, NodeResourcesFit counts nvidia.com/gpu: whole GPUs, not shares",
          "[bench][deployed][dynamic]") {
  const std::vector<model::Node> nodes = {to_node({"a", 64000, 1 << 20, 2, "T4"})};
  const SchedulerConfig config = shipped_config();
  auto port = in_process_extender(nodes, paper("bestfit"));
  KubeScheduler kube(nodes, config, *port, 42);
  const TracePod two = timed("two", 2, 1000, 0, 10), one = timed("one", 1, 1000, 0, 10);
  const TracePod share = timed("share", 1, 500, 0, 10), cpu = timed("cpu", 0, 0, 0, 10);
  CHECK(kube.fits(two, 0));
  std::int64_t granted = 0;
  REQUIRE(kube.schedule(two, "u-two", &granted) == 0);
  CHECK(granted == 2000);
  CHECK_FALSE(kube.fits(one, 0));  // Insufficient nvidia.com/gpu
  CHECK(kube.fits(share, 0));      // gapless.io is ignored: only the extender refuses it
  CHECK(kube.fits(cpu, 0));
  CHECK(kube.schedule(share, "u-share", &granted) == kube.node_count());  // the extender's no
  kube.remove(two, "u-two", 0);
  CHECK(kube.fits(one, 0));
  CHECK(kube.schedule(one, "u-one", &granted) == 0);  // the extender saw the GPUs freed
}

TEST_CASE("dynamic as deployed: on one node kube-scheduler's path starts pods as in-process",
          "[bench][deployed][dynamic]") {
  // One 4-GPU node: kube-scheduler has no choice to make, so every start must match.
  const std::vector<model::Node> nodes = {to_node({"solo", 32000, 1 << 20, 4, "T4"})};
  std::vector<TracePod> pods;
  const int gpus[] = {1, 2, 4, 1, 1, 0, 2, 1, 4, 1, 1, 2};
  const int milli[] = {1000, 1000, 1000, 500, 300, 0, 1000, 700, 1000, 1000, 250, 1000};
  for (int i = 0; i < 12; ++i) {
    pods.push_back(timed("q" + std::to_string(10 + i), gpus[i], milli[i], i / 2, 5 + (i * 7) % 11,
                         1000 + 3000 * (i % 3)));
  }
  const Workload w = prepare_workload("solo", pods);
  const Arrivals a = make_dynamic_arrivals(w, nodes.size(), 42);
  // The shipped configuration sends every pod to the extender; with managedResources the
  // CPU-only pod is bound by kube-scheduler itself, and the extender hears of it as it leaves.
  SchedulerConfig gpu_only = shipped_config();
  gpu_only.managed = {"nvidia.com/gpu", "gapless.io/gpu-compute"};
  for (const SchedulerConfig& config : {shipped_config(), gpu_only}) {
    for (const char* name : {"bestfit", "gapless"}) {
      CAPTURE(name, config.managed.size());
      const DynamicRun in_process = replay_dynamic(nodes, w, a, paper(name), 42, {});
      CountingFilter port(in_process_extender(nodes, paper(name)));
      const DynamicRun deployed = replay_dynamic_deployed(nodes, w, a, config, port, 42, {});
      CHECK(in_process.pending_max > 0);  // pods wait: the queue is exercised
      CHECK(deployed.start == in_process.start);
      CHECK(deployed.never_placed == in_process.never_placed);
      CHECK(port.deletions == deployed.started);  // every pod that ran left through the informer
      CHECK(port.filtered.count("q15") == (config.managed.empty() ? 1 : 0));  // the CPU-only pod
    }
  }
}

TEST_CASE("dynamic as deployed: a pod kube-scheduler filters out still gets a drain target",
          "[bench][deployed][dynamic][drain]") {
  // Two 2-GPU nodes. L1 and L2 hold one node for good; S1 and S2 fill the other until 11 and
  // 21. B (2 GPUs, of a profile with drain.minGpus 2) arrives at 2: no node has 2 nvidia.com/gpu
  // free by kube-scheduler's count, so its filter leaves none and the extender's is never
  // called. W (1 GPU, 100 s) arrives at 3. At 11 S1 leaves. Through B's Unschedulable
  // condition the extender holds that node for B: W does not get it, B starts at 21, W at 26.
  // Without that path the extender never hears of B: W takes the GPU and B starves until 111.
  const auto [nodes, w] = drain_scenario();
  const SchedulerConfig config = shipped_config();
  PolicySetup policy = paper("bestfit");
  policy.profile.drain_min_gpus = 2;
  for (std::uint64_t seed : {42, 43}) {
    CAPTURE(seed);
    const Arrivals a = make_dynamic_arrivals(w, nodes.size(), seed);

    CountingFilter with_port(in_process_extender(nodes, policy));
    const DynamicRun with = replay_dynamic_deployed(nodes, w, a, config, with_port, seed, {});
    CHECK(start_of(w, a, with, "B") == 21);
    CHECK(start_of(w, a, with, "W") == 26);
    CHECK(with_port.filtered["B"] == 1);  // only the cycle that bound it, at 21

    CountingFilter without_port(in_process_extender(nodes, policy));
    const DynamicRun without =
        replay_dynamic_deployed(nodes, w, a, config, without_port, seed, {}, false);
    CHECK(start_of(w, a, without, "W") == 11);
    CHECK(start_of(w, a, without, "B") == 111);
    CHECK(without_port.filtered["B"] == 1);
    CHECK(with.pending_max < without.pending_max);

    // Deterministic per seed.
    CountingFilter again_port(in_process_extender(nodes, policy));
    CHECK(replay_dynamic_deployed(nodes, w, a, config, again_port, seed, {}).start == with.start);
  }
}

TEST_CASE("dynamic as deployed: the same seed gives the same run, with one thread or two",
          "[bench][deployed][dynamic]") {
  SweepInput in;
  REQUIRE(load_inputs(kFixtures + "nodes.csv", {kFixtures + "pods.csv"}, &in) == "");
  in.policies = {paper("bestfit"), shipped_policy()};
  const SchedulerConfig config = shipped_config();
  DynamicOptions opt;
  opt.speedup = 1000;  // 136 GPUs asked of 102: pods wait
  const DynamicRunner runner = [&](const std::vector<model::Node>& nodes, const Workload& w,
                                   const Arrivals& a, const PolicySetup& policy, std::uint64_t seed,
                                   const DynamicOptions& options) {
    auto port = in_process_extender(nodes, policy);
    return replay_dynamic_deployed(nodes, w, a, config, *port, seed, options);
  };
  const std::vector<int> seeds = {42, 43};
  auto one = run_dynamic_sweep(in.nodes, in.workloads, in.policies, seeds, opt, 1, {}, runner);
  auto two = run_dynamic_sweep(in.nodes, in.workloads, in.policies, seeds, opt, 2, {}, runner);
  REQUIRE(one.size() == 2);
  for (std::size_t c = 0; c < one.size(); ++c) {
    for (std::size_t s = 0; s < seeds.size(); ++s) {
      const DynamicRun& r = one[c].runs[s];
      CHECK(r.start == two[c].runs[s].start);
      CHECK(r.arrived == 160);
      CHECK(r.started + r.never_placed == 160);
      CHECK(r.pending_max > 0);
    }
  }
  one[0].deployed_waits = "filter+unschedulable";
  const std::string line = dynamic_json_line(one[0], opt);
  CHECK(line.starts_with(
      R"({"mode":"deployed","replay":"dynamic","waits":"filter+unschedulable","trace":"pods",)"));
}
