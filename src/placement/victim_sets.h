// The search both device-aware preemption (preemption.cpp) and consolidation (consolidation.cpp)
// run over one node's pods: does a request fit once some of them are gone, and every set of k of
// them, in a fixed order, with a cap on how many sets a search may try.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "gapless/model/allocation.h"
#include "gapless/model/node.h"
#include "gapless/model/request.h"

namespace gapless::placement::detail {

// Does `req` fit `node` once the allocations pool[i] for i in `set` are gone?
bool fits_without(const model::Node& node, const std::vector<const model::Allocation*>& pool,
                  const std::vector<int>& set, const model::GpuRequest& req);

// C(n, k), or any value above `cap` once it is known to exceed it (no overflow).
std::int64_t subsets_count(std::size_t n, std::size_t k, std::int64_t cap);

// Calls visit(set) for every k-subset of [0, n) in lexicographic order (each set ascending);
// stops early when visit returns false. Nothing is visited when k == 0 or k > n.
void for_each_subset(std::size_t n, std::size_t k,
                     const std::function<bool(const std::vector<int>&)>& visit);

}  // namespace gapless::placement::detail
