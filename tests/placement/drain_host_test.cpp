// The drain target behind kube-scheduler (SchedulerOptions::check_host off, as gapless-extender
// runs): the waiting stage still counts CPU and memory, which NodeResourcesFit only checks for
// the node a pod is placed on, never for the node a waiting pod holds.
#include <catch2/catch.hpp>

#include <string>
#include <utility>

#include "gapless/placement/drain.h"
#include "gapless/placement/scheduler.h"
#include "test_nodes.h"

using namespace gapless;
using namespace gapless::testnodes;

TEST_CASE("drain target behind kube-scheduler: a node without the cores is not held",
          "[placement][drain]") {
  // The node the name's tie-break would pick between two equally close ones gets the hog, so
  // a stage blind to CPU picks it.
  const bool a_first = placement::tie_break_rank("a") < placement::tie_break_rank("b");
  const std::string hogged = a_first ? "a" : "b";
  const std::string other = a_first ? "b" : "a";
  model::Cluster cluster;
  for (const char* name : {"a", "b"}) {
    model::Node n = h100_nvswitch(name);
    n.host.cpu_milli = 96000;
    cluster.upsert_node(n);
  }
  placement::Profile profile = bundle();
  profile.drain_min_gpus = 2;
  placement::SchedulerOptions options;
  options.check_host = false;
  placement::Scheduler sched(std::move(cluster),
                             placement::Policy{"test", {profile}, profile.name, {}, {}}, options);
  profile = sched.policy()->policy.profiles.front();

  // Both nodes one GPU short of an 8-GPU pod (a 1-GPU pod of 2 cores on each); on `hogged`, a
  // CPU-only pod kube-scheduler bound takes 80 of the 96 cores.
  model::GpuRequest one = whole(1);
  one.host.cpu_milli = 2000;
  for (const std::string& node : {hogged, other}) {
    REQUIRE(sched.reserve(pod(node + "-1"), one, profile, node));
  }
  model::Allocation hog;
  hog.pod_uid = "hog";
  hog.node = hogged;
  hog.host.cpu_milli = 80000;
  sched.mutate([&](model::Cluster& c) { REQUIRE(c.restore(hog)); });

  // An 8-GPU pod of 64 cores: once the 1-GPU pod leaves `hogged`, 14 cores are free there and
  // kube-scheduler still refuses it; `other` would take it.
  model::GpuRequest train = whole(8);
  train.host.cpu_milli = 64000;
  REQUIRE(sched.wait(pod("train"), train, profile, 1.0));
  REQUIRE(sched.wait(pod("train"), train, profile, 2.0));
  REQUIRE(sched.drain());
  CHECK(sched.drain()->node == other);

  SECTION("a node with every GPU free but too few cores in all is never the target") {
    model::Node few = h100_nvswitch("few");
    few.host.cpu_milli = 32000;
    sched.mutate([&](model::Cluster& c) { c.upsert_node(few); });
    REQUIRE(sched.drain());
    CHECK(sched.drain()->node == other);
  }
  SECTION("a pod asking more cores than any node has never waits") {
    model::GpuRequest huge = train;
    huge.host.cpu_milli = 128000;
    CHECK_FALSE(sched.wait(pod("huge"), huge, profile, 3.0));
    CHECK(sched.waiting() == 1);
  }
}
