// The runner's warm-up (Scheduler::warm): the verdict cache filled for the request shapes asked
// most, off the pods' path, in chunks that step aside for writers.
#include <algorithm>
#include <span>
#include <thread>

#include "gapless/placement/scheduler.h"

namespace gapless::placement {

namespace {

// Nodes warm() prepares per hold of the read lock: short enough (~0.3 ms at the cold cost of
// ~1 us per node) that a reserve waiting for the write lock barely notices.
constexpr std::size_t kWarmChunk = 256;

}  // namespace

bool profile_draws(const Profile& profile) {
  for (const auto* level : {&profile.node, &profile.gpu}) {
    for (const WeightedStrategy& ws : *level) {
      if (ws.strategy->uses_draw()) return true;
    }
  }
  return false;
}

bool Scheduler::warm(const LoadedPolicy& loaded, const std::function<bool()>& stop) const {
  if (!options_.use_cache) return true;
  std::vector<std::pair<model::GpuRequest, const Profile*>> shapes;
  std::vector<std::string> names;
  std::uint64_t version = 0;
  {
    std::shared_lock lock(mu_);
    version = mix_version_.load();
    if (score_cache(loaded) == nullptr) return false;  // a policy behind the mix
    shapes = stages_.mix->most_asked(loaded.policy, options_.warm_shapes);
    if (shapes.empty()) return true;
    for (const model::Node* n : cluster_.nodes()) names.push_back(n->name);
  }
  for (const auto& [req, profile] : shapes) {
    if (profile_draws(*profile)) continue;  // nothing to keep: the random draw is the pod's
    for (std::size_t begin = 0; begin < names.size(); begin += kWarmChunk) {
      if (stop()) return false;
      // glibc's rwlock lets readers in while a writer waits: step aside, or a reserve or a mix
      // change would wait out the whole pass instead of one chunk.
      while (writers_waiting_.load() > 0) std::this_thread::yield();
      std::shared_lock lock(mu_);
      if (mix_version_.load() != version) return false;
      const std::size_t size = std::min(kWarmChunk, names.size() - begin);
      warm_nodes(cluster_, req, *profile, std::span(names).subspan(begin, size), loaded.cache,
                 options_.check_host);
    }
  }
  return true;
}

}  // namespace gapless::placement
