#include "gapless/placement/fit.h"

#include <bit>
#include <string>

#include "gapless/placement/demand.h"
#include "mig_choice.h"
#include "node_search.h"

namespace gapless::placement {
namespace {

using model::RequestKind;

QuickFit never(FitReason why) {
  return {FitCode::kUnresolvable, why};
}
QuickFit not_now(FitReason why) {
  return {FitCode::kFullNow, why};
}

QuickFit check_gpus(const model::Node& node, const model::GpuRequest& req) {
  std::uint64_t able = 0, free = 0;
  for (const model::Gpu& g : node.gpus) {
    if (!can_serve(g, req)) continue;
    able |= std::uint64_t{1} << g.index;
    if (can_serve_now(g, req)) free |= std::uint64_t{1} << g.index;
  }
  const int k = req.units();
  const bool required = req.topology == model::TopologyWish::kNvlinkRequired && k >= 2;
  if (std::popcount(able) < k) return never(FitReason::kInsufficientCapacity);
  if (required && !nvlink_clique_exists(node.links, able, k)) {
    return never(FitReason::kNoNvlinkSet);
  }
  if (std::popcount(free) < k) return not_now(FitReason::kInsufficientFree);
  if (required && !nvlink_clique_exists(node.links, free, k)) {
    return not_now(FitReason::kNoFreeNvlinkSet);
  }
  return {};
}

QuickFit check_mig(const model::Node& node, const model::GpuRequest& req) {
  const int cap = mig_capacity_when_empty(node, req);
  if (cap == 0) return never(FitReason::kMigProfileAbsent);
  if (cap < req.mig_count) return never(FitReason::kInsufficientCapacity);
  if (!choose_mig(node, req, Profile{})) return not_now(FitReason::kInsufficientFreeMig);
  return {};
}

std::string what(const model::GpuRequest& req) {
  const std::string k = std::to_string(req.units());
  switch (req.kind) {
    case RequestKind::kWhole:
      return k + " whole GPU(s)";
    case RequestKind::kShared:
      return k + " GPU(s) with " + std::to_string(req.shared.memory_mib) + " MiB vRAM and " +
             std::to_string(req.shared.compute_milli) + " milli compute";
    case RequestKind::kGpushare:
      return "one GPU with " + std::to_string(req.gpushare_units) + " aliyun.com/gpu-mem units";
    case RequestKind::kMig:
      return k + " MIG " + req.mig_profile + " instance(s)";
    case RequestKind::kNone:
      break;
  }
  return k + " GPU(s)";
}

// NodeResourcesFit's check, for nodes that track host resources (capacity 0: not tracked).
QuickFit check_host(const model::Node& node, const model::GpuRequest& req) {
  const model::HostResources& cap = node.host;
  const model::HostResources& used = node.host_used;
  if (cap.cpu_milli > 0 && req.host.cpu_milli > 0) {
    if (req.host.cpu_milli > cap.cpu_milli) return never(FitReason::kInsufficientCpu);
    if (used.cpu_milli + req.host.cpu_milli > cap.cpu_milli) {
      return not_now(FitReason::kInsufficientCpu);
    }
  }
  if (cap.memory_mib > 0 && req.host.memory_mib > 0) {
    if (req.host.memory_mib > cap.memory_mib) return never(FitReason::kInsufficientMemory);
    if (used.memory_mib + req.host.memory_mib > cap.memory_mib) {
      return not_now(FitReason::kInsufficientMemory);
    }
  }
  return {};
}

}  // namespace

QuickFit quick_fit(const model::Node& node, const model::GpuRequest& req) {
  if (const QuickFit host = check_host(node, req); host.code != FitCode::kFits) return host;
  if (req.kind == RequestKind::kNone) return {};
  if (node.gpus.empty() && node.mig_pool.empty()) return never(FitReason::kNoGpus);
  if (node.fenced()) return not_now(FitReason::kFenced);
  if (!req.models.empty()) {
    bool any = false;
    for (const model::Gpu& g : node.gpus) any = any || model_allowed(g, req);
    if (!any) return never(FitReason::kModelMismatch);
  }
  return req.kind == RequestKind::kMig ? check_mig(node, req) : check_gpus(node, req);
}

std::string describe(FitReason why, const model::GpuRequest& req) {
  const std::string k = std::to_string(req.units());
  std::string text;
  switch (why) {
    case FitReason::kNone:
      return "";
    case FitReason::kNoGpus:
      text = "node has no GPUs known to Gapless";
      break;
    case FitReason::kFenced:
      text = "node is fenced until its allocation records can be read";
      break;
    case FitReason::kModelMismatch: {
      std::string models;
      for (const auto& m : req.models) models += (models.empty() ? "" : ",") + m;
      text = "no GPU of the allowed models (" + models + ")";
      break;
    }
    case FitReason::kInsufficientCapacity:
      text = req.kind == RequestKind::kMig
                 ? "node cannot hold " + what(req)
                 : "node has fewer than " + what(req) + " that could serve this pod";
      break;
    case FitReason::kNoNvlinkSet:
      text = "node has no " + k + " GPUs all connected by NVLink";
      break;
    case FitReason::kInsufficientFree:
      text = "fewer than " + what(req) + " free";
      break;
    case FitReason::kNoFreeNvlinkSet:
      text = "no " + k + " free GPUs all connected by NVLink";
      break;
    case FitReason::kMigProfileAbsent:
      text = "no GPU on the node offers MIG profile " + req.mig_profile;
      break;
    case FitReason::kInsufficientFreeMig:
      text = "fewer than " + what(req) + " free";
      break;
    case FitReason::kInsufficientCpu:
      text = "node lacks the CPU this pod requests";
      break;
    case FitReason::kInsufficientMemory:
      text = "node lacks the memory this pod requests";
      break;
  }
  return "gapless: " + text;
}

std::string_view label(FitReason why) {
  switch (why) {
    case FitReason::kNone:
      return "";
    case FitReason::kNoGpus:
      return "no_gpus";
    case FitReason::kFenced:
      return "node_fenced";
    case FitReason::kModelMismatch:
      return "model_mismatch";
    case FitReason::kInsufficientCapacity:
      return "insufficient_capacity";
    case FitReason::kNoNvlinkSet:
      return "no_nvlink_set";
    case FitReason::kInsufficientFree:
      return "insufficient_free_gpus";
    case FitReason::kNoFreeNvlinkSet:
      return "no_free_nvlink_set";
    case FitReason::kMigProfileAbsent:
      return "mig_profile_absent";
    case FitReason::kInsufficientFreeMig:
      return "insufficient_free_mig";
    case FitReason::kInsufficientCpu:
      return "insufficient_cpu";
    case FitReason::kInsufficientMemory:
      return "insufficient_memory";
  }
  return "";
}

Fit check_fit(const model::Node& node, const model::GpuRequest& req) {
  const QuickFit q = quick_fit(node, req);
  if (q.code == FitCode::kFits) return {};
  return {q.code, describe(q.why, req), std::string(label(q.why))};
}

}  // namespace gapless::placement
