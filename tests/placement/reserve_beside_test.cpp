// Scheduler::reserve beside allocations the model does not count yet: other replicas' claims
// (docs/high-availability.md). The choice avoids them; the model does not keep them.
#include <catch2/catch.hpp>

#include "gapless/placement/scheduler.h"
#include "test_nodes.h"

using namespace gapless;

namespace {

model::Allocation holding(const std::string& uid, std::initializer_list<int> gpus) {
  model::Allocation a;
  a.pod_uid = uid;
  a.pod_ns = "ml";
  a.pod_name = uid;
  a.node = "h100";
  for (int i : gpus) a.gpus.push_back({i, "", 0, 0, 0});
  return a;
}

std::vector<int> indices(const model::Allocation& a) {
  std::vector<int> out;
  for (const auto& g : a.gpus) out.push_back(g.index);
  return out;
}

}  // namespace

TEST_CASE("reserve beside other replicas' claims avoids their GPUs and keeps none of them",
          "[placement][ha]") {
  model::Cluster cluster;
  cluster.upsert_node(testnodes::h100_nvswitch("h100"));
  placement::Scheduler s(std::move(cluster), placement::builtin_policy(),
                         placement::SchedulerOptions{false});
  const auto loaded = s.policy();
  std::string error;
  model::PodInfo pod{"ml", "mine", "uid-mine", "", 0, {}, "", ""};
  const placement::Profile* profile = placement::Scheduler::select_profile(*loaded, pod, &error);
  REQUIRE(profile != nullptr);
  model::GpuRequest req;
  req.kind = model::RequestKind::kWhole;
  req.whole = 4;

  const std::vector<model::Allocation> held = {holding("theirs", {0, 1, 2, 3})};
  auto placed = s.reserve(pod, req, *profile, "h100", held);
  REQUIRE(placed.ok());
  CHECK(indices(*placed) == std::vector<int>{4, 5, 6, 7});
  std::size_t count = 0;
  s.read([&](const model::Cluster& c) {
    count = c.allocation_count();
    CHECK(c.allocation("theirs") == nullptr);
  });
  CHECK(count == 1);

  SECTION("nothing fits beside them: refused, model unchanged") {
    model::PodInfo other{"ml", "other", "uid-other", "", 0, {}, "", ""};
    CHECK_FALSE(s.reserve(other, req, *profile, "h100", held).ok());
    s.read([&](const model::Cluster& c) { CHECK(c.allocation_count() == 1); });
  }
  SECTION("a held allocation of the pod itself is ignored") {
    REQUIRE(s.unreserve(*placed));
    model::GpuRequest all = req;
    all.whole = 8;
    CHECK(s.reserve(pod, all, *profile, "h100", {holding("uid-mine", {0, 1, 2, 3})}).ok());
  }
}
