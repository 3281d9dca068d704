#include "gapless/placement/engine.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <optional>
#include <string_view>
#include <unordered_set>

#include "gapless/placement/choice.h"

namespace gapless::placement {

namespace {

// QuickFit packed into a cache value and back.
std::int32_t pack(QuickFit f) {
  return static_cast<std::int32_t>(f.code) << 8 | static_cast<std::int32_t>(f.why);
}
QuickFit unpack(std::int32_t v) {
  return QuickFit{static_cast<FitCode>(v >> 8), static_cast<FitReason>(v & 0xff)};
}

constexpr std::size_t kNoReason = static_cast<std::size_t>(-1);

std::unordered_map<std::string, std::string> rejections_where(const FilterResult& r,
                                                              bool unresolvable, bool labels) {
  std::unordered_map<std::string, std::string> out;
  for (const FilterResult::Rejection& x : r.rejected) {
    const FilterResult::Reason& why = r.reasons[x.reason];
    if (labels) {
      out.emplace(x.node, std::string(why.label));
    } else if (why.unresolvable == unresolvable) {
      out.emplace(x.node, why.text);
    }
  }
  return out;
}

}  // namespace

std::unordered_map<std::string, std::string> FilterResult::failed() const {
  return rejections_where(*this, false, false);
}
std::unordered_map<std::string, std::string> FilterResult::unresolvable() const {
  return rejections_where(*this, true, false);
}
std::unordered_map<std::string, std::string> FilterResult::labels() const {
  return rejections_where(*this, false, true);
}

// The hot path of every pod: no allocation per node beyond the output names. A name given twice
// is reported once: known nodes are recognised by their slot, unknown ones (rare) by name.
FilterResult filter(const model::Cluster& cluster, const model::GpuRequest& req,
                    const std::vector<std::string>& nodes, VerdictCache* cache) {
  std::optional<VerdictCache::Lease> lease;
  if (cache != nullptr) lease.emplace(cache->lease(req, nullptr, cluster.slot_count()));
  auto verdict = [&](const model::Node& node) {
    std::int32_t v = 0;
    if (lease && lease->get(node, &v)) return unpack(v);
    const QuickFit fit = quick_fit(node, req);
    if (lease) lease->put(node, pack(fit));
    return fit;
  };

  FilterResult out;
  out.passed.reserve(nodes.size());
  std::vector<bool> seen(cluster.slot_count());
  std::unordered_set<std::string_view> unknown_seen;
  // Index into out.reasons per FitReason, and for unknown nodes.
  std::array<std::size_t, 32> reason_index;
  reason_index.fill(kNoReason);
  std::size_t unknown_reason = kNoReason;
  auto reject = [&](const std::string& name, std::size_t* index, auto make_reason) {
    if (*index == kNoReason) {
      *index = out.reasons.size();
      out.reasons.push_back(make_reason());
    }
    out.rejected.push_back({name, *index});
  };

  for (const std::string& name : nodes) {
    const model::Node* node = cluster.find_node(name);
    if (node == nullptr) {
      if (!unknown_seen.insert(name).second) continue;
      if (req.kind == model::RequestKind::kNone) {
        out.passed.push_back(name);
        continue;
      }
      reject(name, &unknown_reason, [] {
        return FilterResult::Reason{"gapless: node is not in Gapless's inventory", "unknown_node",
                                    true};
      });
      continue;
    }
    if (seen[node->slot]) continue;
    seen[node->slot] = true;
    const QuickFit fit = verdict(*node);
    if (fit.code == FitCode::kFits) {
      out.passed.push_back(name);
      continue;
    }
    reject(name, &reason_index.at(static_cast<std::size_t>(fit.why)), [&] {
      return FilterResult::Reason{describe(fit.why, req), label(fit.why),
                                  fit.code == FitCode::kUnresolvable};
    });
  }
  return out;
}

namespace {

bool topology_counts(const model::GpuRequest& req) {
  return req.topology != model::TopologyWish::kNone && req.units() >= 2;
}

// Weighted mean of the node-level strategies, the GPU-level score of the pick, and (for
// multi-GPU requests that care) the connectivity of the pick and the largest NVLink island it
// leaves free, so that of two nodes that give the pod equally good GPUs the one whose big island
// survives is preferred (an 8-GPU job later still finds one).
double weighted_score(const model::Node& node, const model::GpuRequest& req, const Profile& profile,
                      const double* gpu_score, double conn, double island_kept = 1.0) {
  double sum = 0, weights = 0;
  for (const WeightedStrategy& ws : profile.node) {
    sum += ws.weight * ws.strategy->score_node_in(profile.context, node, req);
    weights += ws.weight;
  }
  if (gpu_score != nullptr) {
    sum += profile.gpu_weight * *gpu_score;
    weights += profile.gpu_weight;
  }
  if (topology_counts(req)) {
    sum += profile.topology_weight * (conn + island_kept);
    weights += 2 * profile.topology_weight;
  }
  return weights > 0 ? sum / weights : 0.0;
}

}  // namespace

double score_node(const model::Node& node, const model::GpuRequest& req, const Profile& profile) {
  if (req.kind == model::RequestKind::kNone) return 0.0;
  double gpu_score = 0, conn = 1, island_kept = 1;
  const bool islands = topology_counts(req) && profile.topology_weight > 0;
  if (!score_pick(node, req, profile, &gpu_score, &conn, islands ? &island_kept : nullptr)) {
    return -1.0;
  }
  return weighted_score(node, req, profile, &gpu_score, conn, island_kept);
}

double score_fitting_node(const model::Node& node, const model::GpuRequest& req,
                          const Profile& profile) {
  if (req.kind == model::RequestKind::kNone) {
    return weighted_score(node, req, profile, nullptr, 1.0);
  }
  if (profile.gpu_weight == 0 && !(topology_counts(req) && profile.topology_weight != 0)) {
    const double none = 0;
    return weighted_score(node, req, profile, &none, 1.0);
  }
  return score_node(node, req, profile);
}

std::vector<int> prioritize(const model::Cluster& cluster, const model::GpuRequest& req,
                            const Profile& profile, const std::vector<std::string>& nodes,
                            VerdictCache* cache) {
  std::optional<VerdictCache::Lease> lease;
  if (cache != nullptr && scores_are_cacheable(profile)) {
    lease.emplace(cache->lease(req, &profile, cluster.slot_count()));
  }
  std::vector<int> scores;
  scores.reserve(nodes.size());
  for (const std::string& name : nodes) {
    const model::Node* node = cluster.find_node(name);
    if (node == nullptr) {
      scores.push_back(0);
      continue;
    }
    std::int32_t cached = 0;
    if (lease && lease->get(*node, &cached)) {
      scores.push_back(cached);
      continue;
    }
    const double s = score_node(*node, req, profile);
    const int score = s < 0 ? 0 : static_cast<int>(std::lround(10.0 * s));
    if (lease) lease->put(*node, score);
    scores.push_back(score);
  }
  return scores;
}

Result<model::Allocation> place(const model::Cluster& cluster, const model::GpuRequest& req,
                                const Profile& profile, const model::PodInfo& pod,
                                const std::string& node_name) {
  const model::Node* node = cluster.find_node(node_name);
  if (node == nullptr) return Error{"node " + node_name + " is not in Gapless's inventory"};
  Fit fit = check_fit(*node, req);
  if (!fit.fits()) return Error{fit.reason};
  auto choice = choose(*node, req, profile);
  if (!choice) return Error{"gapless: no placement found on node " + node_name};
  model::Allocation a;
  a.pod_uid = pod.uid;
  a.pod_ns = pod.ns;
  a.pod_name = pod.name;
  a.node = node_name;
  a.gpus = std::move(choice->gpus);
  a.mig = std::move(choice->mig);
  return a;
}

}  // namespace gapless::placement
