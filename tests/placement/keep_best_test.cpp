// filter.keepBest: Scheduler::filter narrows under one read lock, scoring the passed nodes
// without looking them up again, and ranks level scores by hashing only the nodes level with
// the cut. Checked against the plain definition: filter everything, score the passed nodes,
// sort by (score descending, tie_break_rank, input position), keep the first K in input order.
#include <catch2/catch.hpp>

#include <algorithm>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "gapless/placement/engine.h"
#include "gapless/placement/scheduler.h"
#include "test_nodes.h"

namespace {

using namespace gapless;
using namespace gapless::testnodes;

model::Cluster tied_cluster(std::mt19937& rng) {
  model::Cluster c;
  for (int i = 0; i < 60; ++i) {
    const std::string name = "node-" + std::to_string(i);
    // Mostly identical empty nodes, so many scores are level at the cut.
    c.upsert_node(i % 5 == 4   ? dgx1_v100(name)
                  : i % 7 == 6 ? t4_node(name, 8)
                               : h100_nvswitch(name));
  }
  for (int p = 0; p < 40; ++p) {
    const std::string node = "node-" + std::to_string(rng() % 60);
    model::PodInfo info;
    info.ns = "t";
    info.name = "fill-" + std::to_string(p);
    info.uid = "fill-" + std::to_string(p);
    auto a = placement::place(c, whole(1 + static_cast<int>(rng() % 3)),
                              placement::builtin_policy().profiles[0], info, node);
    if (a) REQUIRE(c.commit(*a));
  }
  return c;
}

std::vector<std::string> expected_kept(const placement::Scheduler& s,
                                       const placement::LoadedPolicy& loaded,
                                       const model::GpuRequest& req, const placement::Profile& all,
                                       const std::vector<std::string>& names, std::size_t keep) {
  const placement::FilterResult r = s.filter(loaded, {}, req, names);
  const std::vector<double> raw = s.score(loaded, req, all, r.passed);
  std::vector<std::size_t> order(r.passed.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    if (raw[a] != raw[b]) return raw[a] > raw[b];
    const auto ra = placement::tie_break_rank(r.passed[a]);
    const auto rb = placement::tie_break_rank(r.passed[b]);
    return ra != rb ? ra < rb : a < b;
  });
  if (order.size() > keep) order.resize(keep);
  std::sort(order.begin(), order.end());
  std::vector<std::string> out;
  for (std::size_t i : order) out.push_back(r.passed[i]);
  return out;
}

}  // namespace

TEST_CASE("keepBest keeps exactly the K best by score, then tie-break rank",
          "[placement][keep_best]") {
  std::mt19937 rng(11);
  placement::Scheduler s(tied_cluster(rng), placement::builtin_policy());
  const auto loaded = s.policy();
  const placement::Profile& all = loaded->policy.profiles[0];
  std::vector<std::string> names;
  for (int i = 59; i >= 0; --i) names.push_back("node-" + std::to_string(i));
  names.push_back("no-such-node");
  for (std::size_t keep : {1u, 3u, 8u, 59u}) {
    placement::Profile narrowing = all;
    narrowing.keep_best = static_cast<int>(keep);
    for (const model::GpuRequest& req :
         {whole(1), whole(2), whole(4), whole(8), shared(8192, 250)}) {
      INFO("keep " << keep << " request of " << req.units() << " units");
      const std::vector<std::string> want = expected_kept(s, *loaded, req, all, names, keep);
      const placement::FilterResult got = s.filter(*loaded, {}, req, narrowing, names);
      CHECK(got.passed == want);
      // Every input name is answered once: kept, failed or unresolvable.
      CHECK(got.passed.size() + got.rejected.size() == names.size());
    }
  }
}
