// The quota stage alone (placement/quota_stage.h), against a model it follows through Start and
// ModelChanged, without the runner: PreFilter, Filter, PreReserve and Reserve.
#include <catch2/catch.hpp>

#include "gapless/placement/engine.h"
#include "gapless/placement/quota_stage.h"
#include "test_nodes.h"

namespace {

using namespace gapless;
using namespace gapless::placement;
using namespace gapless::testnodes;

Quota h100_quota(int limit) {
  Quota q;
  q.name = "team-a";
  q.namespaces = {"ml"};
  q.per_model["nvidia-h100-80gb-hbm3"][QuotaResource::kWholeGpus] = limit;
  return q;
}

model::PodInfo in_ml(const std::string& uid) {
  model::PodInfo p = pod(uid);
  p.ns = "ml";
  return p;
}

// Commits `a` and tells the stage, as the runner does after every change.
void commit(model::Cluster& c, QuotaStage& stage, const model::Allocation& a) {
  REQUIRE(c.commit(a));
  stage.model_changed(c, c.take_changes(), {});
}

}  // namespace

TEST_CASE("quota stage: PreFilter refuses a pod over its namespace's limit, naming the quota",
          "[quota_stage]") {
  model::Cluster c;
  c.upsert_node(h100_nvswitch("h"));
  QuotaStage stage;
  stage.start(c);
  Quota q;
  q.name = "team-a";
  q.namespaces = {"ml"};
  q.limits[QuotaResource::kWholeGpus] = 2;
  const std::vector<Quota> quotas{q};
  const model::GpuRequest three = whole(3);
  const model::PodInfo p = in_ml("p");
  const StageCall call{c, quotas, 8, p, three, false};
  const auto why = stage.pre_filter(call);
  REQUIRE(why);
  CHECK(why->unresolvable);
  CHECK(why->label == "over_quota");
  CHECK(why->text.find("\"team-a\"") != std::string::npos);

  const model::GpuRequest two = whole(2);
  const StageCall fits{c, quotas, 8, p, two, false};
  CHECK_FALSE(stage.pre_filter(fits));
  const std::vector<Quota> none;
  CHECK_FALSE(stage.pre_filter(StageCall{c, none, 8, p, three, false}));
}

TEST_CASE("quota stage: usage follows the model; Filter and Reserve refuse a model over its limit",
          "[quota_stage]") {
  model::Cluster c;
  c.upsert_node(h100_nvswitch("h"));
  c.upsert_node(t4_node("t"));
  c.take_changes();
  QuotaStage stage;
  stage.start(c);
  const std::vector<Quota> quotas{h100_quota(2)};
  const model::PodInfo held = in_ml("held");
  const auto placed = place(c, whole(2), bundle(), held, "h");
  REQUIRE(placed);
  commit(c, stage, *placed);

  const model::GpuRequest one = whole(1);
  const model::PodInfo p = in_ml("p");
  const StageCall call{c, quotas, 12, p, one, false};
  std::vector<const model::Node*> resolved;
  FilterResult r = filter(c, one, {"h", "t"}, nullptr, false, &resolved);
  REQUIRE(r.passed.size() == 2);
  stage.filter(call, &r, &resolved);
  CHECK(r.passed == std::vector<std::string>{"t"});
  REQUIRE(resolved.size() == 1);
  CHECK(resolved[0]->name == "t");
  CHECK(r.unresolvable().at("h").find("nvidia-h100-80gb-hbm3") != std::string::npos);

  model::GpuRequest fit = one;
  CHECK_FALSE(stage.pre_reserve(call, "h", &fit).empty());
  CHECK(stage.pre_reserve(call, "t", &fit).empty());
  const auto on_h = place(c, one, bundle(), p, "h");
  REQUIRE(on_h);
  CHECK_FALSE(stage.reserve(call, "h", *on_h).empty());

  // The held pod leaves: the H100 is usable again.
  REQUIRE(c.release("held"));
  stage.model_changed(c, c.take_changes(), {});
  CHECK(stage.pre_reserve(call, "h", &fit).empty());
  CHECK(stage.reserve(call, "h", *on_h).empty());
}
