#include "gapless/model/node.h"

#include <algorithm>

namespace gapless::model {

NodeFill node_fill(const Node& node) {
  NodeFill f;
  for (const Gpu& g : node.gpus) {
    if (!g.usable()) continue;
    ++f.gpus;
    const GpuUsage& u = g.used;
    if (u.idle()) {
      ++f.idle;
      continue;
    }
    double share = 0.0;
    if (u.whole) {
      share = 1.0;
    } else if (u.mig_slices_used != 0) {
      share = static_cast<double>(u.mig_compute_used) / kMigComputeSlices;
    } else {
      const double mem =
          g.memory_mib > 0 ? static_cast<double>(u.memory_used_mib) / g.memory_mib : 0;
      const double cpu = static_cast<double>(u.compute_used_milli) / kFullComputeMilli;
      const double gs =
          g.gpushare_capacity > 0 ? static_cast<double>(u.gpushare_used) / g.gpushare_capacity : 0;
      share = std::max({mem, cpu, gs});
    }
    f.used += std::min(share, 1.0);
  }
  return f;
}

}  // namespace gapless::model
