// Scheduler::warm, the warm-up stage: it prepares the verdict cache for the request shapes
// observe() counted most, so their next pods are answered from the cache, and it never changes
// an answer (checked against a Scheduler without the cache).
#include <catch2/catch.hpp>

#include <random>
#include <string>
#include <vector>

#include "gapless/placement/engine.h"
#include "gapless/placement/scheduler.h"
#include "test_nodes.h"

namespace {

using namespace gapless;
using namespace gapless::testnodes;

model::Cluster mixed_cluster() {
  model::Cluster c;
  std::mt19937 rng(5);
  for (int i = 0; i < 40; ++i) {
    const std::string name = "node-" + std::to_string(i);
    c.upsert_node(i % 3 == 0   ? dgx1_v100(name)
                  : i % 3 == 1 ? t4_node(name, 8)
                               : h100_nvswitch(name));
  }
  for (int p = 0; p < 30; ++p) {
    model::PodInfo info;
    info.ns = "t";
    info.name = info.uid = "fill-" + std::to_string(p);
    auto a = placement::place(c, whole(1 + static_cast<int>(rng() % 3)),
                              placement::builtin_policy().profiles[0], info,
                              "node-" + std::to_string(rng() % 40));
    if (a) REQUIRE(c.commit(*a));
  }
  return c;
}

model::PodInfo pod_of(const std::string& uid) {
  model::PodInfo p;
  p.ns = "t";
  p.name = p.uid = uid;
  return p;
}

std::vector<std::string> names_of(const placement::Scheduler& s) {
  std::vector<std::string> out;
  s.read([&](const model::Cluster& c) {
    for (const model::Node* n : c.nodes()) out.push_back(n->name);
  });
  return out;
}

const auto kNeverStop = [] { return false; };

// Filter (keepBest) then prioritize, as the extender answers one pod.
std::pair<std::vector<std::string>, std::vector<double>> ask(const placement::Scheduler& s,
                                                             const model::GpuRequest& req,
                                                             const std::string& uid) {
  const auto loaded = s.policy();
  const placement::Profile& profile = loaded->policy.profiles[0];
  const std::vector<std::string> names = names_of(s);
  auto f = s.filter(*loaded, pod_of(uid), req, profile, names);
  return {f.passed, s.score(*loaded, req, profile, f.passed)};
}

}  // namespace

TEST_CASE("warm prepares the shapes asked most: their next pods hit the cache, same answers",
          "[placement][warm]") {
  placement::Scheduler warmed(mixed_cluster(), placement::builtin_policy());
  placement::SchedulerOptions no_cache;
  no_cache.use_cache = false;
  placement::Scheduler plain(mixed_cluster(), placement::builtin_policy(), no_cache);
  const model::GpuRequest one = whole(1), two = shared(8192, 250);
  for (placement::Scheduler* s : {&warmed, &plain}) {
    for (int i = 0; i < 3; ++i) s->observe(pod_of("a-" + std::to_string(i)), one);
    s->observe(pod_of("b-0"), two);
  }
  const auto loaded = warmed.policy();
  REQUIRE(warmed.warm(*loaded, kNeverStop));
  const auto misses = loaded->cache.misses();
  for (const model::GpuRequest& req : {one, two}) {
    const auto got = ask(warmed, req, "next");
    CHECK(got == ask(plain, req, "next"));
    CHECK_FALSE(got.first.empty());
  }
  CHECK(loaded->cache.misses() == misses);  // every verdict and score came from the cache
  CHECK(loaded->cache.hits() > 0);
}

TEST_CASE("warm prepares only warm_shapes shapes, the most asked, and no pod without GPUs",
          "[placement][warm]") {
  placement::SchedulerOptions options;
  options.warm_shapes = 1;
  placement::Scheduler s(mixed_cluster(), placement::builtin_policy(), options);
  model::GpuRequest cpu_only;
  cpu_only.host = {4000, 1024};
  for (int i = 0; i < 5; ++i) s.observe(pod_of("c-" + std::to_string(i)), cpu_only);
  s.observe(pod_of("rare"), whole(2));
  s.observe(pod_of("common-0"), whole(1));
  s.observe(pod_of("common-1"), whole(1));
  const auto loaded = s.policy();
  REQUIRE(s.warm(*loaded, kNeverStop));
  auto misses = loaded->cache.misses();
  ask(s, whole(1), "x");
  CHECK(loaded->cache.misses() == misses);
  ask(s, whole(2), "y");  // second most asked: not prepared
  CHECK(loaded->cache.misses() > misses);
}

TEST_CASE("warm gives up when told to stop or when the mix changes under it", "[placement][warm]") {
  placement::Scheduler s(mixed_cluster(), placement::builtin_policy());
  s.observe(pod_of("a"), whole(1));
  const auto loaded = s.policy();
  CHECK_FALSE(s.warm(*loaded, [] { return true; }));
  CHECK(loaded->cache.misses() == 0);

  // The mix moves between two chunks (a new multi-GPU shape rebuilds it at once): the pass
  // stops rather than store scores computed under the old mix.
  placement::Scheduler big(mixed_cluster(), placement::builtin_policy());
  big.observe(pod_of("a"), whole(1));
  const auto version = big.mix_version();
  int calls = 0;
  const auto big_loaded = big.policy();
  CHECK_FALSE(big.warm(*big_loaded, [&] {
    if (++calls == 1) big.observe(pod_of("new-shape"), whole(4));
    return false;
  }));
  CHECK(big.mix_version() != version);
  // The cache still holds only answers of the current mix: a warm pass now completes and the
  // answers equal an uncached scheduler's.
  CHECK(big.warm(*big.policy(), kNeverStop));
  placement::SchedulerOptions no_cache;
  no_cache.use_cache = false;
  placement::Scheduler plain(mixed_cluster(), placement::builtin_policy(), no_cache);
  plain.observe(pod_of("a"), whole(1));
  plain.observe(pod_of("new-shape"), whole(4));
  CHECK(ask(big, whole(1), "n") == ask(plain, whole(1), "n"));
}

TEST_CASE("warm with nothing asked yet has nothing to do", "[placement][warm]") {
  placement::Scheduler s(mixed_cluster(), placement::builtin_policy());
  const auto loaded = s.policy();
  CHECK(s.warm(*loaded, kNeverStop));
  CHECK(loaded->cache.hits() + loaded->cache.misses() == 0);
}
