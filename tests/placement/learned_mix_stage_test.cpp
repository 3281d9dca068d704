// The learned-mix stage alone (placement/learned_mix_stage.h): pods counted once per UID, the
// shapes asked most, a fixed mix that never moves, and a deleted pod's UID forgotten.
#include <catch2/catch.hpp>

#include "gapless/placement/learned_mix_stage.h"
#include "test_nodes.h"

namespace {

using namespace gapless;
using namespace gapless::placement;
using namespace gapless::testnodes;

}  // namespace

TEST_CASE("learned mix stage counts a pod once per UID and learns its shape",
          "[learned_mix_stage]") {
  LearnedMixStage stage(nullptr);
  CHECK(stage.observe(pod("a"), whole(2)) == LearnedMixStage::Observed::kMixChanged);
  CHECK(stage.seen("a"));
  CHECK(stage.observe(pod("a"), whole(2)) == LearnedMixStage::Observed::kAlreadySeen);
  CHECK(stage.observed() == 1);
  REQUIRE(stage.mix().entries.size() == 1);
  CHECK(stage.mix().entries[0].shape.gpus == 2);

  model::Cluster none;
  stage.pod_forgotten(none, "a");
  CHECK_FALSE(stage.seen("a"));
  CHECK(stage.observe(pod("a"), whole(2)) != LearnedMixStage::Observed::kAlreadySeen);
  CHECK(stage.observed() == 2);
}

TEST_CASE("learned mix stage: the shapes asked most, with their first pod's profile",
          "[learned_mix_stage]") {
  LearnedMixStage stage(nullptr);
  stage.observe(pod("one"), whole(1));
  stage.observe(pod("two-a"), whole(2));
  stage.observe(pod("two-b"), whole(2));
  stage.observe(pod("cpu"), model::GpuRequest{});  // never reaches the extender: not prepared
  const Policy policy = builtin_policy();
  const auto shapes = stage.most_asked(policy, 8);
  REQUIRE(shapes.size() == 2);
  CHECK(shapes[0].first == whole(2));
  CHECK(shapes[1].first == whole(1));
  CHECK(shapes[0].second == &policy.profiles[0]);
  CHECK(stage.most_asked(policy, 1).size() == 1);
}

TEST_CASE("learned mix stage with a fixed mix scores against it and never moves",
          "[learned_mix_stage]") {
  WorkloadMix fixed;
  fixed.entries.push_back({});
  fixed.entries[0].shape.gpus = 8;
  fixed.entries[0].weight = 1;
  LearnedMixStage stage(&fixed);
  CHECK(&stage.mix() == &fixed);
  CHECK(stage.observe(pod("a"), whole(1)) == LearnedMixStage::Observed::kCounted);
  CHECK(stage.mix().entries.size() == 1);
  CHECK(stage.mix().entries[0].shape.gpus == 8);
}
