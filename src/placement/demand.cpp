#include "gapless/placement/demand.h"

#include <algorithm>
#include <cmath>

#include "gapless/model/ascii.h"

namespace gapless::placement {

using model::Gpu;
using model::GpuRequest;
using model::RequestKind;

bool model_in_list(const Gpu& gpu, const GpuRequest& req) {
  return std::any_of(req.models.begin(), req.models.end(),
                     [&](const std::string& m) { return model::ascii_iequals(m, gpu.model); });
}

bool can_serve(const Gpu& gpu, const GpuRequest& req) {
  if (!gpu.usable() || !model_allowed(gpu, req)) return false;
  switch (req.kind) {
    case RequestKind::kWhole:
      return !gpu.mig.enabled && gpu.gpushare_capacity == 0;
    case RequestKind::kShared:
      return !gpu.mig.enabled && gpu.gpushare_capacity == 0 &&
             (req.shared.memory_mib == 0 || gpu.memory_mib >= req.shared.memory_mib);
    case RequestKind::kGpushare:
      return !gpu.mig.enabled && gpu.gpushare_capacity >= req.gpushare_units;
    case RequestKind::kMig:
      return gpu.mig.enabled && model::find_mig_profile(gpu.mig_family, req.mig_profile) != nullptr;
    case RequestKind::kNone:
      return true;
  }
  return false;
}

bool can_serve_now(const Gpu& gpu, const GpuRequest& req) {
  if (!can_serve(gpu, req)) return false;
  const model::GpuUsage& u = gpu.used;
  switch (req.kind) {
    case RequestKind::kWhole:
      return u.idle();
    case RequestKind::kShared:
      return !u.whole && gpu.memory_free_mib() >= req.shared.memory_mib &&
             gpu.compute_free_milli() >= req.shared.compute_milli;
    case RequestKind::kGpushare:
      return !u.whole && u.shared_pods == 0 &&
             gpu.gpushare_capacity - u.gpushare_used >= req.gpushare_units;
    case RequestKind::kMig:
      return false;  // MIG placements are found by mig_choice
    case RequestKind::kNone:
      return true;
  }
  return false;
}

double demand_in_gpus(const model::Node& node, const GpuRequest& req) {
  switch (req.kind) {
    case RequestKind::kWhole:
      return req.whole;
    case RequestKind::kShared: {
      std::int64_t mem = 0;
      for (const Gpu& g : node.gpus) mem = std::max(mem, g.memory_mib);
      const double m = mem > 0 ? static_cast<double>(req.shared.memory_mib) / mem : 0.0;
      const double c = static_cast<double>(req.shared.compute_milli) / model::kFullComputeMilli;
      return req.shared.count * std::min(1.0, std::max(m, c));
    }
    case RequestKind::kGpushare: {
      for (const Gpu& g : node.gpus) {
        if (g.gpushare_capacity > 0) {
          return std::min(1.0, static_cast<double>(req.gpushare_units) / g.gpushare_capacity);
        }
      }
      return 1.0;
    }
    case RequestKind::kMig: {
      for (const Gpu& g : node.gpus) {
        if (const auto* p = model::find_mig_profile(g.mig_family, req.mig_profile)) {
          return req.mig_count * static_cast<double>(p->compute_slices) / model::kMigComputeSlices;
        }
      }
      return req.mig_count / static_cast<double>(model::kMigComputeSlices);
    }
    case RequestKind::kNone:
      break;
  }
  return 0.0;
}

double gpu_fill(const Gpu& gpu) {
  const model::GpuUsage& u = gpu.used;
  if (u.whole) return 1.0;
  double f = static_cast<double>(u.compute_used_milli) / model::kFullComputeMilli;
  if (gpu.memory_mib > 0) f = std::max(f, static_cast<double>(u.memory_used_mib) / gpu.memory_mib);
  if (gpu.gpushare_capacity > 0) {
    f = std::max(f, static_cast<double>(u.gpushare_used) / gpu.gpushare_capacity);
  }
  f = std::max(f, static_cast<double>(u.mig_compute_used) / model::kMigComputeSlices);
  return std::min(f, 1.0);
}

int free_milli(const Gpu& gpu) {
  if (!gpu.usable()) return 0;
  const model::GpuUsage& u = gpu.used;
  if (u.whole) return 0;
  // The common case (compute shares only) without floating point.
  if (gpu.memory_mib == 0 && gpu.gpushare_capacity == 0 && u.mig_compute_used == 0) {
    return std::max(0, model::kFullComputeMilli - u.compute_used_milli);
  }
  return static_cast<int>(std::lround(model::kFullComputeMilli * (1.0 - gpu_fill(gpu))));
}

int free_milli(const model::Node& node) {
  int sum = 0;
  for (const Gpu& g : node.gpus) sum += free_milli(g);
  return sum;
}

int milli_per_gpu(const model::Node& node, const GpuRequest& req) {
  switch (req.kind) {
    case RequestKind::kWhole:
      return model::kFullComputeMilli;
    case RequestKind::kShared:
      if (req.shared.memory_mib == 0) return req.shared.compute_milli;
      break;
    case RequestKind::kNone:
      return 0;
    default:
      break;
  }
  const int units = std::max(1, req.units());
  return static_cast<int>(
      std::lround(model::kFullComputeMilli * demand_in_gpus(node, req) / units));
}

}  // namespace gapless::placement
