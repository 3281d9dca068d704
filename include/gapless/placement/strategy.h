// A placement strategy scores at two levels: which node a pod should go to (prioritize), and which
// GPUs inside the chosen node it should get (bind). Each strategy lives in its own file under
// src/placement/strategies/ and is registered once in registry.cpp.
//
// Scores are in [0, 1], higher is better. Strategies are stateless and thread-safe.
#pragma once

#include <string_view>
#include <vector>

#include "gapless/model/gpu.h"
#include "gapless/model/node.h"
#include "gapless/model/request.h"

namespace gapless::placement {

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
};

// The registry: every built-in strategy, by name. Returns nullptr for unknown names.
const Strategy* find_strategy(std::string_view name);
// Names of all registered strategies, sorted.
std::vector<std::string_view> strategy_names();

}  // namespace gapless::placement
