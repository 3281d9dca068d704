#include "gapless/placement/workload.h"

#include "gapless/model/gpu.h"

#include <algorithm>
#include <tuple>

namespace gapless::placement {
namespace {

std::string joined(const std::vector<std::string>& models) {
  std::string out;
  for (const std::string& m : models) out += (out.empty() ? "" : "|") + m;
  return out;
}

// WorkloadMix::model_demand from all the counts.
std::vector<std::pair<std::string, double>> model_demand(const ShapeCounts& counts) {
  std::map<std::string, double> by_model;
  double total = 0;
  for (const auto& [shape, n] : counts) {
    const double demand = n * shape.gpus * shape.milli;
    total += demand;
    if (shape.models.empty() || demand == 0) continue;
    std::vector<std::string> models;
    for (const std::string& m : shape.models) models.push_back(model::model_key(m));
    std::sort(models.begin(), models.end());
    models.erase(std::unique(models.begin(), models.end()), models.end());
    for (const std::string& m : models) by_model[m] += demand / models.size();
  }
  std::vector<std::pair<std::string, double>> out;
  for (const auto& [m, d] : by_model) out.emplace_back(m, d / total);
  return out;
}

// Rebuilds for new multi-GPU shapes, at most (the Alibaba trace's variants have 13 to 31 such
// shapes; a cluster with hundreds would otherwise rebuild the fragment cache for each).
constexpr std::size_t kMaxNovelRebuilds = 32;

}  // namespace

bool shape_less(const TaskShape& a, const TaskShape& b) {
  if (std::tie(a.cpu_milli, a.milli, a.gpus) != std::tie(b.cpu_milli, b.milli, b.gpus)) {
    return std::tie(a.cpu_milli, a.milli, a.gpus) < std::tie(b.cpu_milli, b.milli, b.gpus);
  }
  if (a.models != b.models) return joined(a.models) < joined(b.models);
  return a.memory_mib < b.memory_mib;
}

TaskShape shape_of(const model::GpuRequest& req, bool with_memory) {
  TaskShape s;
  s.cpu_milli = req.host.cpu_milli;
  if (with_memory) s.memory_mib = req.host.memory_mib;
  s.models = req.models;
  switch (req.kind) {
    case model::RequestKind::kNone:
      s.models.clear();
      break;
    case model::RequestKind::kWhole:
      s.milli = model::kFullComputeMilli;
      s.gpus = req.whole;
      break;
    case model::RequestKind::kShared:
      s.milli = req.shared.compute_milli > 0 ? req.shared.compute_milli : model::kFullComputeMilli;
      s.gpus = req.shared.count;
      break;
    case model::RequestKind::kMig:
    case model::RequestKind::kGpushare:
      s.milli = model::kFullComputeMilli;
      s.gpus = req.units();
      break;
  }
  return s;
}

WorkloadMix typical_mix(const ShapeCounts& counts, double coverage) {
  std::vector<std::pair<const TaskShape*, double>> order;
  double total = 0;
  for (const auto& [shape, n] : counts) {
    order.emplace_back(&shape, n);
    total += n;
  }
  // Count descending; equal counts: the larger shape first (GetTypicalPods sorts ascending by
  // (count, shape) and reverses).
  std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
    if (a.second != b.second) return a.second > b.second;
    return shape_less(*b.first, *a.first);
  });
  WorkloadMix mix;
  double kept = 0;
  for (const auto& [shape, n] : order) {
    if (kept >= coverage * total) break;
    mix.entries.push_back({*shape, n});
    kept += n;
  }
  for (auto& e : mix.entries) e.weight /= kept;
  std::map<int, double> shares;
  double share_total = 0;
  for (const auto& [shape, n] : counts) {
    if (shape.gpus == 1 && shape.milli > 0 && shape.milli < model::kFullComputeMilli) {
      shares[shape.milli] += n;
      share_total += n;
    }
  }
  for (const auto& [milli, n] : shares) mix.share_sizes.emplace_back(milli, n / share_total);
  mix.model_demand = model_demand(counts);
  double demand = 0, multi_demand = 0, whole_cpu = 0, whole_gpus = 0, gpu_pods_cpu = 0;
  for (const auto& [shape, n] : counts) {
    if (shape.gpus >= 2) mix.multi_gpu_shapes.emplace_back(shape, n / total);
    const double gpu_milli = n * shape.gpus * shape.milli;
    demand += gpu_milli;
    if (shape.gpus >= 1) gpu_pods_cpu += n * static_cast<double>(shape.cpu_milli);
    if (shape.gpus >= 2) multi_demand += gpu_milli;
    if (shape.gpus >= 1 && shape.milli >= model::kFullComputeMilli) {
      whole_cpu += n * static_cast<double>(shape.cpu_milli);
      whole_gpus += n * shape.gpus;
    }
  }
  if (demand > 0) mix.multi_gpu_demand = multi_demand / demand;
  if (demand > 0) mix.cpu_per_gpu_milli = gpu_pods_cpu / demand;
  if (whole_gpus > 0) mix.cpu_per_whole_gpu = whole_cpu / whole_gpus;
  return mix;
}

bool WorkloadLearner::observe(const TaskShape& shape) {
  double& count = counts_[shape];
  // A multi-GPU shape not seen before: rebuild now, not at the next power of two, so that a
  // scarce host is kept whole for its second pod (FragmentCache::breaks_scarce_host). Few
  // shapes ask several GPUs (13 in the Alibaba trace), so this adds few rebuilds.
  bool novel = shape.gpus >= 2 && count == 0;
  if (novel) {  // at most kMaxNovelRebuilds of them: a cluster of many such shapes pays no more
    std::size_t multi = 0;
    for (const auto& [s, n] : counts_) multi += s.gpus >= 2 ? 1 : 0;
    novel = multi <= kMaxNovelRebuilds;  // this shape is counted already
  }
  count += 1;
  ++seen_;
  if (!novel && seen_ < next_rebuild_) return false;
  if (seen_ >= next_rebuild_) next_rebuild_ *= 2;
  mix_ = typical_mix(counts_, coverage_);
  return true;
}

}  // namespace gapless::placement
