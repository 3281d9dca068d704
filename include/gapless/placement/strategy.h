// A placement strategy scores at two levels: which node a pod should go to (prioritize), and which
// GPUs inside the chosen node it should get (bind). Each strategy lives in its own file under
// src/placement/ and is registered once in registry.cpp.
//
// Scores are in [0, 1], higher is better. Strategies are stateless and thread-safe; what a
// strategy needs beyond the node and the request comes in a ScoreContext.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "gapless/model/gpu.h"
#include "gapless/model/node.h"
#include "gapless/model/request.h"

namespace gapless::placement {

struct WorkloadMix;
class FragmentCache;

// What some strategies read beyond the node and the request. Not part of a policy file: the
// driver (bench, server) points it at state it owns and keeps current. Everything may be absent;
// each strategy says what it does then.
struct ScoreContext {
  // The pod shapes expected next (fgd, gapless). Null: unknown.
  const WorkloadMix* workload = nullptr;
  // F_n(workload) of every node, kept current by the driver. Null: computed on the spot.
  // REQUIRES: when set, built for `workload`.
  const FragmentCache* fragments = nullptr;
  // A random draw for the pod being placed (random). Drivers change it for every pod.
  std::uint64_t draw = 0;
  // Set by an owner (placement::Scheduler) that clears its VerdictCache whenever the mix or the
  // fragment cache's meaning changes, so scores under the mix may be cached per node generation.
  bool cache_owner_tracks_mix = false;
};

class Strategy {
 public:
  virtual ~Strategy() = default;
  virtual std::string_view name() const = 0;
  // One line for `--help`-style listings and validation messages.
  virtual std::string_view description() const = 0;

  // How much this strategy likes placing `req` on `node`.
  // REQUIRES: the request fits the node (placement::check_fit said so).
  virtual double score_node(const model::Node& node, const model::GpuRequest& req) const = 0;

  // How much it likes giving `gpu` (on `node`) to `req`.
  // REQUIRES: the request fits on that GPU.
  virtual double score_gpu(const model::Node& node, const model::Gpu& gpu,
                           const model::GpuRequest& req) const = 0;

  // The engine calls these two. Strategies that read the context override them; the others keep
  // these defaults, which ignore it.
  virtual double score_node_in(const ScoreContext& /*ctx*/, const model::Node& node,
                               const model::GpuRequest& req) const {
    return score_node(node, req);
  }
  virtual double score_gpu_in(const ScoreContext& /*ctx*/, const model::Node& node,
                              const model::Gpu& gpu, const model::GpuRequest& req) const {
    return score_gpu(node, gpu, req);
  }
  // True when scores depend on ScoreContext::draw, so they must not be reused across pods.
  virtual bool uses_draw() const { return false; }
};

// The registry: every built-in strategy, by name. Returns nullptr for unknown names.
const Strategy* find_strategy(std::string_view name);
// Names of all registered strategies, sorted.
std::vector<std::string_view> strategy_names();

}  // namespace gapless::placement
