// server::ScoreWarmer: the background thread that runs the Scheduler's warm-up stage at start
// and after mix and policy changes. It must prepare the cache, report caught_up only for a
// complete model, and never change an answer while pods are placed beside it.
#include <atomic>
#include <chrono>
#include <string>
#include <vector>

#include "eventually.h"
#include "gapless/placement/engine.h"
#include "gapless/server/score_warmer.h"
#include "test_server.h"

using namespace gapless;
using namespace gapless::test;
using namespace std::chrono_literals;

namespace {

model::GpuRequest gpus(int n) {
  model::GpuRequest r;
  r.kind = model::RequestKind::kWhole;
  r.whole = n;
  r.host = {4000, 16384};
  return r;
}

model::GpuRequest share(std::int64_t mib, int milli) {
  model::GpuRequest r;
  r.kind = model::RequestKind::kShared;
  r.shared = {mib, milli, 1};
  r.host = {2000, 8192};
  return r;
}

model::PodInfo pod_info(const std::string& uid) {
  model::PodInfo p;
  p.ns = "t";
  p.name = p.uid = uid;
  return p;
}

std::uint64_t misses_of(const placement::Scheduler& s) {
  return s.policy()->cache.misses();
}

// Filter (keepBest) and prioritize for one pod; the node kube-scheduler would pick.
std::string pick(const placement::Scheduler& s, const model::PodInfo& pod,
                 const model::GpuRequest& req, const std::vector<std::string>& nodes) {
  const auto loaded = s.policy();
  const placement::Profile& profile = loaded->policy.profiles[0];
  const auto f = s.filter(*loaded, pod, req, profile, nodes);
  const auto scores =
      placement::Scheduler::normalize(f.passed, s.score(*loaded, req, profile, f.passed));
  std::size_t best = 0;
  for (std::size_t i = 1; i < scores.size(); ++i) {
    if (scores[i] > scores[best]) best = i;
  }
  return f.passed.empty() ? "" : f.passed[best];
}

}  // namespace

TEST_CASE("the warmer prepares the cache at start and again after a mix change",
          "[server][warmer]") {
  placement::Scheduler s(demo_cluster(), placement::builtin_policy());
  for (int i = 0; i < 3; ++i) s.observe(pod_info("one-" + std::to_string(i)), gpus(1));
  server::ScoreWarmer warmer(s, nullptr, 1ms);
  REQUIRE(eventually([&] { return warmer.caught_up(); }));
  std::vector<std::string> nodes;
  s.read([&](const model::Cluster& c) {
    for (const model::Node* n : c.nodes()) nodes.push_back(n->name);
  });
  auto misses = misses_of(s);
  CHECK_FALSE(pick(s, pod_info("next"), gpus(1), nodes).empty());
  CHECK(misses_of(s) == misses);  // answered from what the warmer prepared

  const auto passes = warmer.passes();
  s.observe(pod_info("two-0"), gpus(2));  // a new multi-GPU shape: the mix is rebuilt
  REQUIRE(eventually([&] { return warmer.passes() > passes; }));
  misses = misses_of(s);
  pick(s, pod_info("after"), gpus(1), nodes);
  CHECK(misses_of(s) == misses);
}

TEST_CASE("the warmer is caught up only once a pass ran on a complete model", "[server][warmer]") {
  placement::Scheduler s(demo_cluster(), placement::builtin_policy());
  s.observe(pod_info("a"), gpus(1));
  std::atomic<bool> complete{false};
  server::ScoreWarmer warmer(
      s, [&] { return complete.load(); }, 1ms);
  REQUIRE(eventually([&] { return warmer.passes() >= 1; }));
  CHECK_FALSE(warmer.caught_up());
  complete = true;  // e.g. the informers' first lists applied; the mix did not move meanwhile
  CHECK(eventually([&] { return warmer.caught_up(); }));
}

TEST_CASE("pods placed beside a running warmer get exactly what they get without it",
          "[server][warmer]") {
  placement::Scheduler warmed(demo_cluster(), placement::builtin_policy());
  placement::Scheduler plain(demo_cluster(), placement::builtin_policy());
  std::vector<std::string> nodes;
  plain.read([&](const model::Cluster& c) {
    for (const model::Node* n : c.nodes()) nodes.push_back(n->name);
  });
  server::ScoreWarmer warmer(warmed, nullptr, 1ms);
  const std::vector<model::GpuRequest> shapes = {gpus(1), gpus(2), share(8192, 250), gpus(4),
                                                 share(4096, 125)};
  std::vector<std::string> placed;
  for (int i = 0; i < 40; ++i) {
    const model::PodInfo pod = pod_info("p-" + std::to_string(i));
    const model::GpuRequest& req = shapes[static_cast<std::size_t>(i * 7 % 5)];
    std::vector<std::string> got;
    for (placement::Scheduler* s : {&warmed, &plain}) {
      s->observe(pod, req);  // new shapes and 2^k pods rebuild the mix while the warmer runs
      const std::string node = pick(*s, pod, req, nodes);
      const auto loaded = s->policy();
      if (!node.empty()) REQUIRE(s->reserve(pod, req, loaded->policy.profiles[0], node));
      got.push_back(node);
      if (i % 3 == 2) s->release("p-" + std::to_string(i - 2));
    }
    CHECK(got[0] == got[1]);
  }
}
