// The scheduler's live summary (what /metrics reads) must equal a fresh walk over the model after
// any sequence of reservations, releases, node changes, fences, removals and mix changes: it is
// kept by adding and subtracting nodes, and a drift would show operators a wrong cluster.
#include <catch2/catch.hpp>

#include <random>

#include "gapless/placement/cluster_summary.h"
#include "gapless/placement/scheduler.h"
#include "test_nodes.h"

using namespace gapless;
using namespace gapless::testnodes;

namespace {

model::Cluster fleet() {
  model::Cluster c;
  for (model::Node n :
       {h100_nvswitch("h100"), dgx1_v100("dgx1"), t4_node("t4"), a100_80_mig("a100-80"),
        a100_40_static("a100-40"), gpushare_node("gs"), mig_pool_node("pool", "1g.10gb", 7)}) {
    c.upsert_node(std::move(n));
  }
  return c;
}

placement::ClusterSummary fresh(const placement::Scheduler& sched) {
  const placement::WorkloadMix mix = sched.mix();
  placement::FragmentCache fragments(mix);
  placement::ClusterSummary out;
  sched.read([&](const model::Cluster& c) {
    fragments.rebuild(c.nodes());
    out = placement::summarize(c.nodes(), fragments);
  });
  return out;
}

model::GpuRequest random_request(std::mt19937& rng) {
  switch (rng() % 6) {
    case 0:
      return whole(1);
    case 1:
      return whole(2);
    case 2:
      return whole(4);
    case 3:
      return shared(4096, 250);
    case 4:
      return mig("1g.10gb");
    default:
      return gpushare(2);
  }
}

}  // namespace

TEST_CASE("the live summary equals a fresh one after every change") {
  placement::Scheduler sched(fleet(), placement::builtin_policy());
  const auto loaded = sched.policy();
  const placement::Profile& profile = loaded->policy.profiles.front();
  const std::vector<std::string> names = {"h100", "dgx1", "t4", "a100-80", "a100-40", "gs", "pool"};
  std::mt19937 rng(7);
  std::vector<std::string> held;
  int reserved = 0;
  for (int step = 0; step < 400; ++step) {
    const int op = static_cast<int>(rng() % 10);
    if (op < 6) {
      const std::string uid = "p" + std::to_string(step);
      const model::GpuRequest req = random_request(rng);
      sched.observe(pod(uid), req);  // moves the mix now and then
      if (sched.reserve(pod(uid), req, profile, names[rng() % names.size()])) {
        held.push_back(uid);
        ++reserved;
      }
    } else if (op < 8 && !held.empty()) {
      const std::size_t i = rng() % held.size();
      CHECK(sched.release(held[i]));
      held.erase(held.begin() + static_cast<std::ptrdiff_t>(i));
    } else if (op == 8) {
      const bool sick = rng() % 2 == 0;
      sched.mutate([&](model::Cluster& c) {
        c.upsert_node(sick ? with_unhealthy(dgx1_v100("dgx1"), 3) : dgx1_v100("dgx1"));
        if (sick) c.fence("t4", "a test fence");
      });
    } else {
      // A node leaves (with its pods) and comes back empty.
      sched.mutate([&](model::Cluster& c) {
        c.remove_node("h100");
        c.upsert_node(h100_nvswitch("h100"));
      });
      std::erase_if(held, [&](const std::string& uid) {
        bool gone = false;
        sched.read([&](const model::Cluster& c) { gone = c.allocation(uid) == nullptr; });
        return gone;
      });
    }
    INFO("step " << step);
    REQUIRE(sched.summary() == fresh(sched));
  }
  CHECK(reserved > 50);  // the sequence really exercised placements
  const placement::ClusterSummary s = sched.summary();
  CHECK(s.nodes_ready + s.nodes_fenced == 7);
  CHECK(s.models.count(kH100) == 1);
}
