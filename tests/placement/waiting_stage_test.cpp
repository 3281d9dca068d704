// The waiting stage alone (placement/waiting_stage.h), on a model it follows through
// ModelChanged, without the runner: who may wait, the drain target the oldest confirmed pod
// holds, Filter and PostScore withholding it, and the events that end a wait.
#include <catch2/catch.hpp>

#include "gapless/placement/engine.h"
#include "gapless/placement/waiting_stage.h"
#include "test_nodes.h"

namespace {

using namespace gapless;
using namespace gapless::placement;
using namespace gapless::testnodes;

struct Rig {
  model::Cluster cluster;
  WaitingStage stage{/*check_host=*/false};
  Profile profile = bundle();
  std::vector<Quota> no_quotas;
  model::GpuRequest eight = whole(8);

  Rig() {
    profile.drain_min_gpus = 2;
    for (const char* n : {"a", "b"}) cluster.upsert_node(h100_nvswitch(n));
    fill("a", 6);
    fill("b", 2);
  }
  void fill(const std::string& node, int n) {
    for (int i = 0; i < n; ++i) {
      auto a = place(cluster, whole(1), profile, pod(node + std::to_string(i)), node);
      REQUIRE(a);
      REQUIRE(cluster.commit(*a));
    }
    stage.model_changed(cluster, cluster.take_changes(), {});
  }
  bool wait(const model::PodInfo& p, double now) {
    return stage.wait(StageCall{cluster, no_quotas, 16, p, eight, false}, profile, now, false);
  }
};

}  // namespace

TEST_CASE("waiting stage: only pods of the profile's size wait, and only where a node could serve",
          "[waiting_stage]") {
  Profile p = bundle();
  CHECK_FALSE(WaitingStage::may_wait(pod("x"), whole(8), p));  // no drain_min_gpus
  p.drain_min_gpus = 4;
  CHECK(WaitingStage::may_wait(pod("x"), whole(8), p));
  CHECK_FALSE(WaitingStage::may_wait(pod("x"), whole(2), p));
  CHECK_FALSE(WaitingStage::may_wait(pod(""), whole(8), p));
  CHECK_FALSE(WaitingStage::may_wait(pod("x"), shared(1024, 100), p));

  Rig rig;
  const model::GpuRequest sixteen = whole(16);
  const model::PodInfo huge = pod("huge");
  CHECK_FALSE(rig.stage.wait(StageCall{rig.cluster, rig.no_quotas, 16, huge, sixteen, false},
                             rig.profile, 1.0, false));
  CHECK(rig.stage.size() == 0);
}

TEST_CASE("waiting stage: the pod found waiting twice holds the closest node; others lose it",
          "[waiting_stage]") {
  Rig rig;
  const model::PodInfo big = pod("big");
  REQUIRE(rig.wait(big, 1.0));
  CHECK_FALSE(rig.stage.reservation());  // once is not waiting yet
  REQUIRE(rig.wait(big, 2.0));
  REQUIRE(rig.stage.reservation());
  CHECK(rig.stage.reservation()->node == "b");  // 2 GPUs to free, against 6 on "a"

  const model::GpuRequest one = whole(1);
  const model::PodInfo small = pod("small");
  const StageCall call{rig.cluster, rig.no_quotas, 16, small, one, false};
  std::vector<const model::Node*> resolved;
  FilterResult r = filter(rig.cluster, one, {"a", "b"}, nullptr, false, &resolved);
  rig.stage.filter(call, &r, &resolved);
  CHECK(r.passed == std::vector<std::string>{"a"});
  CHECK(resolved.size() == 1);
  std::vector<double> raw{0.5, 0.9};
  rig.stage.post_score(call, {"a", "b"}, &raw);
  CHECK(raw == std::vector<double>{0.5, -1});

  // The holder itself is not held back.
  const StageCall own{rig.cluster, rig.no_quotas, 16, big, rig.eight, false};
  std::vector<double> mine{0.5, 0.9};
  rig.stage.post_score(own, {"a", "b"}, &mine);
  CHECK(mine == std::vector<double>{0.5, 0.9});
}

TEST_CASE("waiting stage: a deletion, an allocation or the clock ends a wait", "[waiting_stage]") {
  Rig rig;
  REQUIRE(rig.wait(pod("big"), 1.0));
  REQUIRE(rig.wait(pod("big"), 2.0));
  REQUIRE(rig.wait(pod("other"), 3.0));
  REQUIRE(rig.stage.size() == 2);

  rig.stage.pod_forgotten(rig.cluster, "big");
  CHECK(rig.stage.size() == 1);
  CHECK_FALSE(rig.stage.reservation());  // "other" was seen once only

  REQUIRE(rig.stage.any_before(4.0));
  CHECK(rig.stage.expire(rig.cluster, 4.0) == 1);
  CHECK(rig.stage.size() == 0);

  // A pod that gains an allocation waits no more (an informer, or its own reserve).
  REQUIRE(rig.wait(pod("c0"), 5.0));
  REQUIRE(rig.stage.contains("c0"));
  auto a = place(rig.cluster, whole(1), rig.profile, pod("c0"), "b");
  REQUIRE(a);
  REQUIRE(rig.cluster.commit(*a));
  rig.stage.model_changed(rig.cluster, rig.cluster.take_changes(), {});
  CHECK_FALSE(rig.stage.contains("c0"));
}
