// The one place that knows every strategy. Adding a strategy: write <name>.cpp with a class in
// strategies.h, then add it to kStrategies below.
#include <algorithm>
#include <array>

#include "strategies.h"

namespace gapless::placement {
namespace {
const BundleStrategy kBundle;
const SpreadStrategy kSpread;
const RandomStrategy kRandom;
const DotProductStrategy kDotProduct;
const GpuClusteringStrategy kGpuClustering;
const GpuPackingStrategy kGpuPacking;
const BestFitStrategy kBestFit;
const FgdStrategy kFgd;
const GaplessStrategy kGapless;
const std::array<const Strategy*, 9> kStrategies = {&kBundle,     &kSpread,        &kRandom,
                                                    &kDotProduct, &kGpuClustering, &kGpuPacking,
                                                    &kBestFit,    &kFgd,           &kGapless};
}  // namespace

const Strategy* find_strategy(std::string_view name) {
  for (const Strategy* s : kStrategies) {
    if (s->name() == name) return s;
  }
  return nullptr;
}

std::vector<std::string_view> strategy_names() {
  std::vector<std::string_view> out;
  for (const Strategy* s : kStrategies) out.push_back(s->name());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace gapless::placement
