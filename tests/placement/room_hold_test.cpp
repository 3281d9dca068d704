// The room a consolidation plan freed, held for the waiting pod (Scheduler::hold_room,
// drain.h RoomHold): other pods' filter and score avoid the node while the evicted pods
// terminate and holdSeconds after, the waiting pod fits it, other plans leave it alone, and the
// hold ends when the pod gets an allocation, is deleted or the time is over.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "gapless/placement/scheduler.h"
#include "test_nodes.h"

namespace {

using namespace gapless;
using namespace gapless::testnodes;

const std::vector<std::string> kNodes = {"a", "b"};

// a: a fixed 4-GPU pod; b: two movable 2-GPU pods. An 8-GPU pod fits neither; the plan
// evicts b's two pods to a.
struct Rig {
  placement::Scheduler sched;
  placement::Profile profile;

  Rig() : sched(cluster(), policy()) {
    profile = sched.policy()->policy.profiles.front();
    put("fixed", 4, "a", model::Movability::kNever);
    put("s1", 2, "b", model::Movability::kOptedIn);
    put("s2", 2, "b", model::Movability::kOptedIn);
  }
  static model::Cluster cluster() {
    model::Cluster c;
    for (const std::string& n : kNodes) c.upsert_node(h100_nvswitch(n));
    return c;
  }
  static placement::Policy policy() {
    placement::Profile p = bundle();
    p.drain_min_gpus = 2;
    placement::Policy out{"test", {p}, p.name, {}, {}};
    out.consolidation.enabled = true;
    out.consolidation.hold_s = 60;
    return out;
  }
  void put(const std::string& uid, int gpus, const std::string& node, model::Movability m) {
    model::PodInfo p = pod(uid);
    p.movable = m;
    REQUIRE(sched.reserve(p, whole(gpus), profile, node));
  }
  placement::FilterResult filter(const model::PodInfo& p, int gpus) {
    return sched.filter(*sched.policy(), p, whole(gpus), profile, kNodes);
  }
  std::vector<double> score(const model::PodInfo& p, int gpus) {
    return sched.score(*sched.policy(), p, whole(gpus), profile, kNodes);
  }
  placement::ConsolidationSearch plan(const model::PodInfo& p) {
    return sched.consolidate(p, whole(8), profile, 10);
  }
};

bool passed(const placement::FilterResult& r, const std::string& node) {
  return std::find(r.passed.begin(), r.passed.end(), node) != r.passed.end();
}

std::string reason_for(const placement::FilterResult& r, const std::string& node) {
  for (const auto& x : r.rejected) {
    if (x.node == node) return r.reasons.at(x.reason).text;
  }
  return "";
}

}  // namespace

TEST_CASE("the room a plan freed is held for the waiting pod until it starts, goes or times out",
          "[placement][consolidation][drain]") {
  Rig rig;
  const model::PodInfo big = pod("big");
  REQUIRE(rig.sched.wait(big, whole(8), rig.profile, 1.0,
                         placement::Scheduler::WaitSource::kUnschedulable));
  const placement::ConsolidationSearch s = rig.plan(big);
  REQUIRE(s.plan);
  REQUIRE(s.plan->node == "b");
  rig.sched.moves_made(*s.plan, 10);
  rig.sched.hold_room(big, *s.plan, 10);
  REQUIRE(rig.sched.holds().size() == 1);
  CHECK(rig.sched.holds().front().evicted == std::vector<std::string>{"s1", "s2"});
  // The waiting pod's drain target is the room made for it, not another node.
  REQUIRE(rig.sched.drain());
  CHECK(rig.sched.drain()->node == "b");
  CHECK(rig.sched.drain()->pod_uid == "big");

  // The evicted pods terminate: the clock does not run the hold out meanwhile.
  CHECK(rig.sched.expire_holds(500) == 0);
  REQUIRE(rig.sched.release("s1"));
  REQUIRE(rig.sched.release("s2"));
  CHECK(rig.sched.expire_holds(501) == 0);

  // A replacement of the evicted pods' size (b is empty now, a has 4 free) does not get b.
  const model::PodInfo replacement = pod("s1-new");
  const placement::FilterResult r = rig.filter(replacement, 2);
  CHECK(passed(r, "a"));
  CHECK_FALSE(passed(r, "b"));
  CHECK(reason_for(r, "b") ==
        "gapless: node is kept for a waiting pod that consolidation made room for");
  CHECK(rig.score(replacement, 2).at(1) == -1);
  // Nor does one no other node fits.
  CHECK_FALSE(passed(rig.filter(pod("six"), 6), "b"));
  // A pod of higher priority is not held back, as from a drain target.
  model::PodInfo urgent = pod("urgent");
  urgent.priority = 100;
  CHECK(passed(rig.filter(urgent, 2), "b"));
  // The waiting pod fits it.
  CHECK(rig.filter(big, 8).passed == std::vector<std::string>{"b"});

  // Another waiting 8-GPU pod neither "fits now" on the held node nor plans to free it.
  const placement::ConsolidationSearch other = rig.plan(pod("big2"));
  CHECK_FALSE(other.fits_now);
  CHECK_FALSE(other.plan);

  SECTION("holdSeconds after the evicted pods left, the hold ends") {
    // (500: the last time the evicted pods were seen, + 60 s)
    CHECK(rig.sched.expire_holds(559.5) == 0);
    CHECK(rig.sched.expire_holds(560) == 1);
    CHECK(rig.sched.holds().empty());
    // What is left is the drain target of a pod that still waits, as without consolidation.
    CHECK(reason_for(rig.filter(replacement, 2), "b") ==
          "gapless: node is kept to drain for a waiting pod that needs it whole");
    REQUIRE(rig.sched.stop_waiting("big"));
    CHECK(passed(rig.filter(replacement, 2), "b"));
  }
  SECTION("the waiting pod's allocation ends it") {
    REQUIRE(rig.sched.reserve(big, whole(8), rig.profile, "b"));
    CHECK(rig.sched.holds().empty());
    CHECK_FALSE(rig.sched.drain());
  }
  SECTION("the waiting pod's deletion ends it") {
    rig.sched.forget("big");
    CHECK(rig.sched.holds().empty());
    CHECK(passed(rig.filter(replacement, 2), "b"));
  }
}

TEST_CASE("a room is held only for a pod that still waits, and a new plan replaces the old hold",
          "[placement][consolidation][drain]") {
  Rig rig;
  const placement::ConsolidationSearch s = rig.plan(pod("big"));
  REQUIRE(s.plan);
  rig.sched.hold_room(pod(""), *s.plan, 10);  // no UID: nothing to hold for
  CHECK(rig.sched.holds().empty());
  rig.sched.hold_room(pod("fixed"), *s.plan, 10);  // already placed
  CHECK(rig.sched.holds().empty());

  rig.sched.hold_room(pod("big"), *s.plan, 10);
  rig.sched.hold_room(pod("big"), *s.plan, 20);
  REQUIRE(rig.sched.holds().size() == 1);
  CHECK(rig.sched.holds().front().until_s == 80);
  // Without a waiting entry (a profile without drain) the hold still withholds the node.
  CHECK_FALSE(passed(rig.filter(pod("small"), 1), "b"));
}
