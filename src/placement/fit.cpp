#include "gapless/placement/fit.h"

#include <string>

#include "gapless/placement/demand.h"
#include "mig_choice.h"
#include "node_search.h"

namespace gapless::placement {
namespace {

using model::RequestKind;

Fit never(std::string reason, std::string label) {
  return {FitCode::kUnresolvable, "gapless: " + std::move(reason), std::move(label)};
}
Fit not_now(std::string reason, std::string label) {
  return {FitCode::kFullNow, "gapless: " + std::move(reason), std::move(label)};
}

std::string models_text(const model::GpuRequest& req) {
  std::string out;
  for (const auto& m : req.models) out += (out.empty() ? "" : ",") + m;
  return out;
}

// Does some k-subset of `gpus` satisfy an nvlink-required wish?
bool nvlink_set_exists(const model::Node& node, const std::vector<int>& gpus, int k) {
  if (k < 2) return static_cast<int>(gpus.size()) >= k;
  Profile any;  // weights only steer the objective; any feasible set answers the question
  std::vector<double> zeros(gpus.size(), 0.0);
  return best_set(node, gpus, zeros, k, model::TopologyWish::kNvlinkRequired, any).has_value();
}

std::string what(const model::GpuRequest& req) {
  const std::string k = std::to_string(req.units());
  switch (req.kind) {
    case RequestKind::kWhole: return k + " whole GPU(s)";
    case RequestKind::kShared:
      return k + " GPU(s) with " + std::to_string(req.shared.memory_mib) + " MiB vRAM and " +
             std::to_string(req.shared.compute_milli) + " milli compute";
    case RequestKind::kGpushare:
      return "one GPU with " + std::to_string(req.gpushare_units) + " aliyun.com/gpu-mem units";
    default: return k + " GPU(s)";
  }
}

Fit check_gpus(const model::Node& node, const model::GpuRequest& req) {
  std::vector<int> able, free;
  for (const model::Gpu& g : node.gpus) {
    if (!can_serve(g, req)) continue;
    able.push_back(g.index);
    if (can_serve_now(g, req)) free.push_back(g.index);
  }
  const int k = req.units();
  const bool required = req.topology == model::TopologyWish::kNvlinkRequired && k >= 2;
  if (static_cast<int>(able.size()) < k) {
    return never("node has fewer than " + what(req) + " that could serve this pod",
                 "insufficient_capacity");
  }
  if (required && !nvlink_set_exists(node, able, k)) {
    return never("node has no " + std::to_string(k) + " GPUs all connected by NVLink",
                 "no_nvlink_set");
  }
  if (static_cast<int>(free.size()) < k) {
    return not_now("fewer than " + what(req) + " free", "insufficient_free_gpus");
  }
  if (required && !nvlink_set_exists(node, free, k)) {
    return not_now("no " + std::to_string(k) + " free GPUs all connected by NVLink",
                   "no_free_nvlink_set");
  }
  return {};
}

Fit check_mig(const model::Node& node, const model::GpuRequest& req) {
  const int cap = mig_capacity_when_empty(node, req);
  if (cap == 0) {
    return never("no GPU on the node offers MIG profile " + req.mig_profile, "mig_profile_absent");
  }
  if (cap < req.mig_count) {
    return never("node cannot hold " + std::to_string(req.mig_count) + " MIG " + req.mig_profile +
                     " instances",
                 "insufficient_capacity");
  }
  if (!choose_mig(node, req, Profile{})) {
    return not_now("fewer than " + std::to_string(req.mig_count) + " MIG " + req.mig_profile +
                       " instance(s) free",
                   "insufficient_free_mig");
  }
  return {};
}

}  // namespace

Fit check_fit(const model::Node& node, const model::GpuRequest& req) {
  if (req.kind == RequestKind::kNone) return {};
  if (node.gpus.empty() && node.mig_pool.empty()) {
    return never("node has no GPUs known to Gapless", "no_gpus");
  }
  if (node.fenced()) {
    return not_now("node is fenced until its allocation records can be read", "node_fenced");
  }
  if (!req.models.empty()) {
    bool any = false;
    for (const model::Gpu& g : node.gpus) any = any || model_allowed(g, req);
    if (!any) return never("no GPU of the allowed models (" + models_text(req) + ")", "model_mismatch");
  }
  return req.kind == RequestKind::kMig ? check_mig(node, req) : check_gpus(node, req);
}

}  // namespace gapless::placement
