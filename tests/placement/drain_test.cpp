// The drain reservation (placement/drain.h, Scheduler::wait): which node a waiting large pod
// holds, that other pods do not get it, and when it is let go.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "gapless/placement/drain.h"
#include "gapless/placement/scheduler.h"
#include "test_nodes.h"

namespace {

using namespace gapless;
using namespace gapless::testnodes;

// Three 8-GPU nodes with 6, 3 and 5 GPUs in use (by 1-GPU pods "<node>-<i>"), and a 4-GPU node
// that can never take an 8-GPU pod.
struct Rig {
  placement::Profile profile = bundle();
  placement::Scheduler sched;

  Rig() : sched(cluster(), policy(profile_with_drain(bundle()))) {
    profile = sched.policy()->policy.profiles.front();
    fill("a", 6);
    fill("b", 3);
    fill("c", 5);
  }
  static placement::Profile profile_with_drain(placement::Profile p) {
    p.drain_min_gpus = 2;
    return p;
  }
  static model::Cluster cluster() {
    model::Cluster c;
    for (const char* n : {"a", "b", "c"}) c.upsert_node(h100_nvswitch(n));
    c.upsert_node(t4_node("small", 4));
    return c;
  }
  static placement::Policy policy(placement::Profile p) {
    return placement::Policy{"test", {p}, p.name, {}, {}};
  }
  void fill(const std::string& node, int n) {
    for (int i = 0; i < n; ++i) REQUIRE(reserve(node + "-" + std::to_string(i), 1, node));
  }
  bool reserve(const std::string& uid, int gpus, const std::string& node) {
    return static_cast<bool>(sched.reserve(pod(uid), whole(gpus), profile, node));
  }
  placement::FilterResult filter(const model::PodInfo& p, int gpus) {
    return sched.filter(*sched.policy(), p, whole(gpus), profile, {"a", "b", "c", "small"});
  }
  // The waiting 8-GPU pod "big", found waiting twice (as kube-scheduler retries it).
  void big_waits() {
    REQUIRE(sched.wait(pod("big"), whole(8), profile, 1.0));
    REQUIRE(sched.wait(pod("big"), whole(8), profile, 2.0));
  }
  std::string target() const {
    const auto d = sched.drain();
    return d ? d->node : "";
  }
};

bool passed(const placement::FilterResult& r, const std::string& node) {
  for (const std::string& n : r.passed) {
    if (n == node) return true;
  }
  return false;
}

std::string reason_for(const placement::FilterResult& r, const std::string& node) {
  for (const auto& x : r.rejected) {
    if (x.node == node) return r.reasons[x.reason].text;
  }
  return "";
}

}  // namespace

TEST_CASE("the drain target is the host closest to taking the pod: GPUs, then CPU, then name",
          "[placement][drain]") {
  model::Node a = h100_nvswitch("a"), b = h100_nvswitch("b");
  a.gpus[0].used.whole = a.gpus[1].used.whole = true;
  b.gpus[0].used.whole = true;
  const model::Node small = t4_node("small", 4);
  std::vector<const model::Node*> nodes = {&a, &b, &small};
  CHECK(placement::pick_drain_target(nodes, whole(8), true)->name == "b");
  // A node that cannot take the pod even empty is never a target.
  CHECK_FALSE(placement::drain_distance(small, whole(8), true));
  CHECK(placement::pick_drain_target({&small}, whole(8), true) == nullptr);
  // Level on GPUs: the one with less CPU to free wins.
  a.gpus[1].used.whole = false;
  a.host = b.host = {96000, 0};
  a.host_used = {90000, 0};
  b.host_used = {50000, 0};
  model::GpuRequest cpu_heavy = whole(8);
  cpu_heavy.host.cpu_milli = 88000;
  CHECK(placement::pick_drain_target(nodes, cpu_heavy, true)->name == "b");
  // Level on everything: the name's tie-break rank decides, whatever the input order.
  a.host_used = b.host_used;
  const std::string first = placement::pick_drain_target(nodes, cpu_heavy, true)->name;
  nodes = {&small, &b, &a};
  CHECK(placement::pick_drain_target(nodes, cpu_heavy, true)->name == first);
  CHECK(first == (placement::tie_break_rank("a") < placement::tie_break_rank("b") ? "a" : "b"));
  // Fenced nodes are never targets.
  b.fence_reason = "test";
  CHECK_FALSE(placement::drain_distance(b, whole(8), true));
}

TEST_CASE("a large pod found waiting twice holds the closest node", "[placement][drain]") {
  Rig rig;
  REQUIRE(rig.filter(pod("big"), 8).passed.empty());
  CHECK(rig.sched.wait(pod("big"), whole(8), rig.profile, 1.0));
  CHECK(rig.sched.waiting() == 1);
  CHECK_FALSE(rig.sched.drain());  // once: it may be a pod that fails and goes
  CHECK(rig.sched.wait(pod("big"), whole(8), rig.profile, 2.0));
  REQUIRE(rig.sched.drain());
  CHECK(rig.sched.drain()->pod_uid == "big");
  CHECK(rig.target() == "b");
}

TEST_CASE("a pod seen unschedulable on itself holds a node at once and never expires",
          "[placement][drain]") {
  using Source = placement::Scheduler::WaitSource;
  Rig rig;
  CHECK(rig.sched.wait(pod("big"), whole(8), rig.profile, 1.0, Source::kUnschedulable));
  REQUIRE(rig.sched.drain());
  CHECK(rig.target() == "b");
  // A later filter refreshes it without taking its status away.
  CHECK(rig.sched.wait(pod("big"), whole(8), rig.profile, 2.0));
  CHECK(rig.sched.expire_waiting(100.0) == 0);
  CHECK(rig.target() == "b");
  // A pod first inferred from a filter is confirmed when the informer sees it, and then stays.
  REQUIRE(rig.sched.wait(pod("big2"), whole(4), rig.profile, 3.0));
  CHECK(rig.sched.wait(pod("big2"), whole(4), rig.profile, 4.0, Source::kUnschedulable));
  CHECK(rig.sched.expire_waiting(100.0) == 0);
  CHECK(rig.sched.waiting() == 2);
  REQUIRE(rig.sched.stop_waiting("big"));
  REQUIRE(rig.sched.drain());
  CHECK(rig.sched.drain()->pod_uid == "big2");
  // Only a pod inferred from filters alone expires.
  REQUIRE(rig.sched.wait(pod("big3"), whole(4), rig.profile, 5.0));
  CHECK(rig.sched.expire_waiting(100.0) == 1);
  CHECK(rig.sched.waiting() == 1);
}

TEST_CASE("small pods, pods no node could ever take and profiles without drain never wait",
          "[placement][drain]") {
  Rig rig;
  CHECK_FALSE(rig.sched.wait(pod("one"), whole(1), rig.profile));
  CHECK_FALSE(rig.sched.wait(pod("huge"), whole(16), rig.profile));
  CHECK_FALSE(rig.sched.wait(pod("share"), shared(1000, 500), rig.profile));
  placement::Profile off = rig.profile;
  off.drain_min_gpus = 0;
  CHECK_FALSE(rig.sched.wait(pod("big"), whole(8), off));
  CHECK_FALSE(rig.sched.wait(model::PodInfo{}, whole(8), rig.profile));  // no UID
  CHECK(rig.sched.waiting() == 0);
}

TEST_CASE("other pods do not get the drain target, even when nothing else fits",
          "[placement][drain]") {
  Rig rig;
  rig.big_waits();
  REQUIRE(rig.target() == "b");
  const placement::FilterResult r = rig.filter(pod("other"), 1);
  CHECK_FALSE(passed(r, "b"));
  CHECK(passed(r, "a"));
  CHECK(reason_for(r, "b").find("drain") != std::string::npos);
  // Score: the target is -1 for others, scored for the pod that holds it.
  const auto loaded = rig.sched.policy();
  const std::vector<std::string> names = {"a", "b", "c"};
  CHECK(rig.sched.score(*loaded, pod("other"), whole(1), rig.profile, names)[1] == -1);
  CHECK(rig.sched.score(*loaded, pod("big"), whole(1), rig.profile, names)[1] >= 0);
  // Fill a, c and small: b is the only node with free GPUs, and still withheld.
  REQUIRE(rig.reserve("a-rest", 2, "a"));
  REQUIRE(rig.reserve("c-rest", 3, "c"));
  REQUIRE(rig.reserve("small-rest", 4, "small"));
  CHECK(rig.filter(pod("other"), 1).passed.empty());
  CHECK(rig.sched.score(*loaded, pod("other"), whole(1), rig.profile, names)[1] == -1);
  // A pod of higher priority is not held back.
  model::PodInfo urgent = pod("urgent");
  urgent.priority = 100;
  CHECK(passed(rig.filter(urgent, 1), "b"));
}

TEST_CASE("the target moves to a node that became closer, and the choice is deterministic",
          "[placement][drain]") {
  Rig rig;
  rig.big_waits();
  REQUIRE(rig.target() == "b");
  for (int i = 0; i < 4; ++i) REQUIRE(rig.sched.release("c-" + std::to_string(i)));
  CHECK(rig.target() == "c");  // 1 GPU in use against b's 3
  Rig again;
  again.big_waits();
  for (int i = 0; i < 4; ++i) REQUIRE(again.sched.release("c-" + std::to_string(i)));
  CHECK(again.target() == rig.target());
}

TEST_CASE("the target is let go when the pod starts, is deleted, gives up or goes unseen",
          "[placement][drain]") {
  SECTION("starts: the target drained and the pod was reserved there") {
    Rig rig;
    rig.big_waits();
    for (int i = 0; i < 3; ++i) REQUIRE(rig.sched.release("b-" + std::to_string(i)));
    const placement::FilterResult r = rig.filter(pod("big"), 8);
    REQUIRE(passed(r, "b"));
    REQUIRE(rig.reserve("big", 8, "b"));
    CHECK_FALSE(rig.sched.drain());
    CHECK(rig.sched.waiting() == 0);
  }
  SECTION("gives up") {
    Rig rig;
    rig.big_waits();
    CHECK(rig.sched.stop_waiting("big"));
    CHECK_FALSE(rig.sched.drain());
    CHECK(passed(rig.filter(pod("other"), 1), "b"));
    CHECK_FALSE(rig.sched.stop_waiting("big"));
  }
  SECTION("deleted") {
    Rig rig;
    rig.big_waits();
    rig.sched.forget("big");
    CHECK_FALSE(rig.sched.drain());
    CHECK(rig.sched.waiting() == 0);
  }
  SECTION("unseen for longer than the driver's time to live") {
    Rig rig;
    rig.big_waits();  // last seen at 2.0
    CHECK(rig.sched.expire_waiting(1.5) == 0);
    CHECK(rig.sched.drain());
    CHECK(rig.sched.expire_waiting(3.0) == 1);
    CHECK_FALSE(rig.sched.drain());
  }
  SECTION("the next waiting pod takes over") {
    Rig rig;
    rig.big_waits();
    REQUIRE(rig.sched.wait(pod("big2"), whole(4), rig.profile, 3.0));
    REQUIRE(rig.sched.wait(pod("big2"), whole(4), rig.profile, 4.0));
    CHECK(rig.sched.drain()->pod_uid == "big");  // the oldest holds
    REQUIRE(rig.sched.stop_waiting("big"));
    REQUIRE(rig.sched.drain());
    CHECK(rig.sched.drain()->pod_uid == "big2");
  }
}

TEST_CASE("the waiting table is bounded in entries and bytes", "[placement][drain]") {
  placement::DrainQueue q;
  for (std::size_t i = 0; i < placement::DrainQueue::kMaxPods; ++i) {
    REQUIRE(q.wait(pod("p" + std::to_string(i)), whole(8), 2, 0) ==
            placement::DrainQueue::Waited::kRecorded);
  }
  CHECK(q.wait(pod("one-more"), whole(8), 2, 0) == placement::DrainQueue::Waited::kNo);
  CHECK(q.size() == placement::DrainQueue::kMaxPods);

  placement::DrainQueue small;
  model::GpuRequest long_list = whole(8);
  long_list.models.assign(1000, std::string(1000, 'm'));  // ~1 MB of model names per pod
  int kept = 0;
  for (int i = 0; i < 10; ++i) {
    kept += small.wait(pod("m" + std::to_string(i)), long_list, 2, 0) !=
            placement::DrainQueue::Waited::kNo;
  }
  CHECK(kept < 10);
  CHECK(small.bytes() <= placement::DrainQueue::kMaxBytes);
}
