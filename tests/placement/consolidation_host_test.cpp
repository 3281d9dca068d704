// Consolidation behind kube-scheduler (SchedulerOptions::check_host off, as gapless-extender
// runs): the plan still checks CPU and memory, which NodeResourcesFit never sees for a what-if.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "gapless/placement/scheduler.h"
#include "test_nodes.h"

namespace {

using namespace gapless;
using namespace gapless::testnodes;

model::GpuRequest with_cpu(model::GpuRequest r, std::int64_t cpu_milli) {
  r.host.cpu_milli = cpu_milli;
  return r;
}

}  // namespace

TEST_CASE("consolidation behind kube-scheduler: GPUs free without the cores are no room",
          "[consolidation]") {
  model::Cluster cluster;
  for (const char* name : {"a", "b"}) {
    model::Node n = h100_nvswitch(name);
    n.host.cpu_milli = 96000;
    cluster.upsert_node(n);
  }
  placement::Profile profile = bundle();
  placement::Policy policy{"test", {profile}, profile.name, {}, {}};
  policy.consolidation.enabled = true;
  placement::SchedulerOptions options;
  options.check_host = false;
  placement::Scheduler sched(std::move(cluster), policy, options);
  profile = sched.policy()->policy.profiles.front();

  // a: all 8 GPUs free, 90 of its 96 cores taken by a CPU-only pod kube-scheduler bound.
  model::Allocation hog;
  hog.pod_uid = "hog";
  hog.node = "a";
  hog.host.cpu_milli = 90000;
  sched.mutate([&](model::Cluster& c) { REQUIRE(c.restore(hog)); });
  // b: two movable 2-GPU pods of 2 cores each.
  for (const char* uid : {"s1", "s2"}) {
    model::PodInfo p = pod(uid);
    p.movable = model::Movability::kOptedIn;
    REQUIRE(sched.reserve(p, with_cpu(whole(2), 2000), profile, "b"));
  }

  // An 8-GPU pod of 64 cores: NodeResourcesFit refuses a, so "a fits it now" would leave it
  // waiting with nothing moved. Room is made on b; its pods' 4 cores fit beside the hog.
  const placement::ConsolidationSearch s =
      sched.consolidate(pod("train"), with_cpu(whole(8), 64000), profile, 10);
  CHECK_FALSE(s.fits_now);
  REQUIRE(s.plan);
  CHECK(s.plan->node == "b");
  CHECK(s.plan->moves.size() == 2);
  for (const placement::PlannedMove& m : s.plan->moves) CHECK(m.to == "a");

  SECTION("a moved pod goes nowhere its cores do not fit") {
    const placement::ConsolidationSearch big = sched.consolidate(
        pod("train"), with_cpu(whole(8), 64000), profile, 10,
        [](const model::Allocation&) { return std::optional(with_cpu(whole(2), 4000)); });
    CHECK_FALSE(big.fits_now);
    CHECK_FALSE(big.plan);  // a has 6 cores left: one 4-core pod, not two
  }
}
