// The preemption stage alone (placement/preemption_stage.h): PostFilter's answer per node asked,
// in the order asked, from the allocations on each node.
#include <catch2/catch.hpp>

#include "gapless/placement/preemption_stage.h"
#include "test_nodes.h"

namespace {

using namespace gapless;
using namespace gapless::placement;
using namespace gapless::testnodes;

model::Allocation holder(const std::string& uid, const std::string& node, std::vector<int> gpus,
                         std::int32_t priority) {
  model::Allocation a = alloc(uid, node);
  a.priority = priority;
  for (int i : gpus) a.gpus.push_back(whole_grant(i));
  return a;
}

}  // namespace

TEST_CASE("preemption stage: victims per node asked, none for unknown nodes or when none helps",
          "[preemption_stage]") {
  model::Cluster c;
  c.upsert_node(h100_nvswitch("h"));
  c.upsert_node(h100_nvswitch("full-high"));
  REQUIRE(c.commit(holder("low", "h", {0, 1, 2, 3}, 1)));
  REQUIRE(c.commit(holder("mid", "h", {4, 5, 6, 7}, 5)));
  REQUIRE(c.commit(holder("top", "full-high", {0, 1, 2, 3, 4, 5, 6, 7}, 100)));

  const PreemptionStage stage;
  const std::vector<Quota> no_quotas;
  model::PodInfo p = pod("p");
  p.priority = 10;
  const model::GpuRequest four = whole(4);
  const StageCall call{c, no_quotas, 16, p, four, false};
  std::vector<std::optional<VictimChoice>> out;
  REQUIRE(stage.post_filter(call, {{"full-high", {}}, {"h", {}}, {"gone", {}}}, {}, &out));
  REQUIRE(out.size() == 3);
  CHECK_FALSE(out[0]);  // only a pod of higher priority there
  REQUIRE(out[1]);
  CHECK(out[1]->victims == std::vector<std::string>{"low"});  // the lowest priority of the two
  CHECK_FALSE(out[2]);
}
