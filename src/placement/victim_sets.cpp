#include "victim_sets.h"

#include "gapless/model/cluster.h"
#include "gapless/placement/fit.h"

namespace gapless::placement::detail {

bool fits_without(const model::Node& node, const std::vector<const model::Allocation*>& pool,
                  const std::vector<int>& set, const model::GpuRequest& req) {
  model::Node after = node;
  for (int i : set) model::unapply_allocation(after, *pool[i]);
  return quick_fit(after, req).code == FitCode::kFits;
}

std::int64_t subsets_count(std::size_t n, std::size_t k, std::int64_t cap) {
  if (k > n) return 0;
  std::int64_t r = 1;
  for (std::size_t i = 1; i <= k; ++i) {
    r = r * static_cast<std::int64_t>(n - k + i) / static_cast<std::int64_t>(i);
    if (r > cap) return r;  // enough to know
  }
  return r;
}

void for_each_subset(std::size_t n, std::size_t k,
                     const std::function<bool(const std::vector<int>&)>& visit) {
  if (k == 0 || k > n) return;
  std::vector<int> set(k);
  for (std::size_t i = 0; i < k; ++i) set[i] = static_cast<int>(i);
  const int last = static_cast<int>(n);
  while (true) {
    if (!visit(set)) return;
    // Next combination in lexicographic order.
    int i = static_cast<int>(k) - 1;
    while (i >= 0 && set[i] == last - static_cast<int>(k) + i) --i;
    if (i < 0) return;
    ++set[i];
    for (std::size_t j = i + 1; j < k; ++j) set[j] = set[j - 1] + 1;
  }
}

}  // namespace gapless::placement::detail
