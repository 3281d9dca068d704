// What every parsed model::Node must satisfy before it enters the model (model/node.h,
// model/topology.h), and a few feasibility checks over it, so that an inventory the parser
// accepts but the engine cannot handle is caught by the node targets.
#pragma once

#include <string>

#include "fuzz_util.h"
#include "gapless/model/node.h"
#include "gapless/placement/fit.h"

namespace gapless::fuzz {

inline void check_node(const model::Node& node) {
  check(!node.name.empty(), "node without a name");
  const int n = static_cast<int>(node.gpus.size());
  check(n <= model::LinkGraph::kMaxGpus, "node with more GPUs than LinkGraph::kMaxGpus",
        node.name + ": " + std::to_string(n) + " GPUs");
  check(node.links.size() == n, "node whose link graph does not match its GPUs", node.name);
  for (int i = 0; i < n; ++i) {
    const model::Gpu& g = node.gpus[i];
    check(g.index == i, "gpus[i].index != i", node.name);
    check(g.used.mig_instance_used.size() <= g.mig.instances.size(),
          "more MIG usage flags than instances", node.name);
    check(g.memory_mib >= 0 && g.gpushare_capacity >= 0, "negative GPU capacity", node.name);
    check(!g.mig.enabled || g.mig_family != model::MigFamily::kNone,
          "MIG enabled on a GPU without MIG", node.name);
  }
  for (const auto& [profile, pool] : node.mig_pool) {
    check(pool.total > 0 && pool.used == 0, "MIG pool with a bad count", profile);
  }

  // Feasibility over the parsed inventory: every kind of request.
  model::GpuRequest whole;
  whole.kind = model::RequestKind::kWhole;
  whole.whole = 2;
  whole.topology = model::TopologyWish::kNvlinkRequired;
  model::GpuRequest shared;
  shared.kind = model::RequestKind::kShared;
  shared.shared = {8192, 250, 2};
  model::GpuRequest mig;
  mig.kind = model::RequestKind::kMig;
  mig.mig_profile = "1g.10gb";
  mig.mig_count = 1;
  model::GpuRequest gpushare;
  gpushare.kind = model::RequestKind::kGpushare;
  gpushare.gpushare_units = 2;
  for (const model::GpuRequest* req : {&whole, &shared, &mig, &gpushare}) {
    const placement::Fit fit = placement::check_fit(node, *req);
    check(fit.fits() == fit.reason.empty(), "a fit verdict without a reason", fit.reason);
  }
}

}  // namespace gapless::fuzz
