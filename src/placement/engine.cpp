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

// The request feasibility is checked against: without CPU and memory when those are someone
// else's to check (kube-scheduler's NodeResourcesFit, in front of the extender).
const model::GpuRequest& fit_request(const model::GpuRequest& req, bool check_host,
                                     model::GpuRequest* stripped) {
  if (check_host || req.host == model::HostResources{}) return req;
  *stripped = req;
  stripped->host = {};
  return *stripped;
}

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
FilterResult filter(const model::Cluster& cluster, const model::GpuRequest& asked,
                    const std::vector<std::string>& nodes, VerdictCache* cache, bool check_host,
                    std::vector<const model::Node*>* passed_nodes) {
  model::GpuRequest stripped;
  const model::GpuRequest& req = fit_request(asked, check_host, &stripped);
  std::optional<VerdictCache::Lease> lease;
  if (cache != nullptr) lease.emplace(cache->lease(req, nullptr, cluster.slot_count()));
  auto verdict = [&](const model::Node& node) {
    double v = 0;
    if (lease && lease->get(node, &v)) return unpack(static_cast<std::int32_t>(v));
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
        if (passed_nodes != nullptr) passed_nodes->push_back(nullptr);
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
      if (passed_nodes != nullptr) passed_nodes->push_back(node);
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
// survives is preferred (an 8-GPU job later still finds one). `terms`, when given, gets each term:
// the explanation and the score come from this one function.
double weighted_score(const model::Node& node, const model::GpuRequest& req, const Profile& profile,
                      const double* gpu_score, double conn, double island_kept,
                      ScoreBreakdown* terms) {
  double sum = 0, weights = 0;
  // Adds one term; records it only when explaining, so scoring builds no strings.
  // `slot`: where the term goes in ScoreBreakdown; null for a node-level strategy's.
  auto add = [&](std::optional<ScoreTerm> ScoreBreakdown::*slot, std::string_view name,
                 double weight, double score) {
    sum += weight * score;
    weights += weight;
    if (terms == nullptr) return;
    ScoreTerm t{std::string(name), weight, score};
    if (slot != nullptr) {
      terms->*slot = std::move(t);
    } else {
      terms->node.push_back(std::move(t));
    }
  };
  for (const WeightedStrategy& ws : profile.node) {
    add(nullptr, ws.strategy->name(), ws.weight,
        ws.strategy->score_node_in(profile.context, node, req));
  }
  if (gpu_score != nullptr) add(&ScoreBreakdown::gpu, "gpu", profile.gpu_weight, *gpu_score);
  if (topology_counts(req)) {
    add(&ScoreBreakdown::connectivity, "connectivity", profile.topology_weight, conn);
    add(&ScoreBreakdown::island_kept, "island_kept", profile.topology_weight, island_kept);
  }
  const double total = weights > 0 ? sum / weights : 0.0;
  if (terms != nullptr) terms->total = total;
  return total;
}

double score_node_terms(const model::Node& node, const model::GpuRequest& req,
                        const Profile& profile, ScoreBreakdown* terms) {
  if (req.kind == model::RequestKind::kNone) return 0.0;
  double gpu_score = 0, conn = 1, island_kept = 1;
  const bool islands = topology_counts(req) && profile.topology_weight > 0;
  if (!score_pick(node, req, profile, &gpu_score, &conn, islands ? &island_kept : nullptr)) {
    return -1.0;
  }
  return weighted_score(node, req, profile, &gpu_score, conn, island_kept, terms);
}

double score_fitting_terms(const model::Node& node, const model::GpuRequest& req,
                           const Profile& profile, ScoreBreakdown* terms) {
  if (req.kind == model::RequestKind::kNone) {
    return weighted_score(node, req, profile, nullptr, 1.0, 1.0, terms);
  }
  if (profile.gpu_weight == 0 && !(topology_counts(req) && profile.topology_weight != 0)) {
    const double none = 0;
    return weighted_score(node, req, profile, &none, 1.0, 1.0, terms);
  }
  return score_node_terms(node, req, profile, terms);
}

}  // namespace

double score_node(const model::Node& node, const model::GpuRequest& req, const Profile& profile) {
  return score_node_terms(node, req, profile, nullptr);
}

double score_fitting_node(const model::Node& node, const model::GpuRequest& req,
                          const Profile& profile) {
  return score_fitting_terms(node, req, profile, nullptr);
}

ScoreBreakdown explain_fitting_node(const model::Node& node, const model::GpuRequest& req,
                                    const Profile& profile) {
  ScoreBreakdown b;
  b.total = score_fitting_terms(node, req, profile, &b);
  return b;
}

std::vector<double> score_nodes(const model::Cluster& cluster, const model::GpuRequest& req,
                                const Profile& profile, const std::vector<std::string>& nodes,
                                VerdictCache* cache, bool check_host) {
  model::GpuRequest stripped;
  const model::GpuRequest& fit = fit_request(req, check_host, &stripped);
  std::optional<VerdictCache::Lease> lease;
  if (cache != nullptr && scores_are_cacheable(profile)) {
    lease.emplace(cache->lease(req, &profile, cluster.slot_count()));
  }
  std::vector<double> scores;
  scores.reserve(nodes.size());
  for (const std::string& name : nodes) {
    const model::Node* node = cluster.find_node(name);
    if (node == nullptr) {
      scores.push_back(-1.0);
      continue;
    }
    double s = 0;
    if (lease && lease->get(*node, &s)) {
      scores.push_back(s);
      continue;
    }
    s = quick_fit(*node, fit).code == FitCode::kFits ? score_fitting_node(*node, req, profile)
                                                     : -1.0;
    if (lease) lease->put(*node, s);
    scores.push_back(s);
  }
  return scores;
}

std::vector<double> score_passed_nodes(const std::vector<const model::Node*>& nodes,
                                       const model::GpuRequest& req, const Profile& profile,
                                       std::size_t slot_count, VerdictCache* cache) {
  std::optional<VerdictCache::Lease> lease;
  if (cache != nullptr && scores_are_cacheable(profile)) {
    lease.emplace(cache->lease(req, &profile, slot_count));
  }
  std::vector<double> scores;
  scores.reserve(nodes.size());
  for (const model::Node* node : nodes) {
    double s = -1.0;
    if (node != nullptr && !(lease && lease->get(*node, &s))) {
      s = score_fitting_node(*node, req, profile);
      if (lease) lease->put(*node, s);
    }
    scores.push_back(s);
  }
  return scores;
}

std::size_t warm_nodes(const model::Cluster& cluster, const model::GpuRequest& req,
                       const Profile& profile, std::span<const std::string> nodes,
                       VerdictCache& cache, bool check_host) {
  model::GpuRequest stripped;
  const model::GpuRequest& fit_req = fit_request(req, check_host, &stripped);
  std::vector<const model::Node*> fitting;
  {  // filter's table first, released before the score table is taken (as filter then score)
    VerdictCache::Lease verdicts = cache.lease(fit_req, nullptr, cluster.slot_count());
    for (const std::string& name : nodes) {
      const model::Node* node = cluster.find_node(name);
      if (node == nullptr) continue;
      double v = 0;
      QuickFit fit;
      if (verdicts.get(*node, &v)) {
        fit = unpack(static_cast<std::int32_t>(v));
      } else {
        fit = quick_fit(*node, fit_req);
        verdicts.put(*node, pack(fit));
      }
      if (fit.code == FitCode::kFits) fitting.push_back(node);
    }
  }
  if (!scores_are_cacheable(profile)) return 0;
  VerdictCache::Lease scores = cache.lease(req, &profile, cluster.slot_count());
  if (scores.bypassed()) return 0;  // a pod's call holds the table: nothing could be kept
  std::size_t computed = 0;
  for (const model::Node* node : fitting) {
    double s = 0;
    if (scores.get(*node, &s)) continue;
    scores.put(*node, score_fitting_node(*node, req, profile));
    ++computed;
  }
  return computed;
}

std::uint64_t tie_break_rank(std::string_view node) {
  std::uint64_t h = 14695981039346656037ULL;  // FNV-1a: stable across runs and platforms
  for (unsigned char c : node) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  // FNV-1a alone keeps names that differ only in their last characters (node-0001, node-0002, ...)
  // in nearly the order of those characters, and node numbering often follows hardware generations:
  // the tie-break then prefers one GPU model. SplitMix64's finalizer scatters them.
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ULL;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebULL;
  h ^= h >> 31;
  return h;
}

std::vector<int> normalize_scores(const std::vector<double>& raw,
                                  const std::vector<std::uint64_t>& rank) {
  std::vector<int> out(raw.size(), 0);
  std::size_t best = raw.size();
  for (std::size_t i = 0; i < raw.size(); ++i) {
    if (raw[i] < 0) continue;
    if (best == raw.size() || raw[i] > raw[best] || (raw[i] == raw[best] && rank[i] < rank[best])) {
      best = i;
    }
  }
  if (best == raw.size()) return out;
  double low = raw[best];
  for (double r : raw) {
    if (r >= 0) low = std::min(low, r);
  }
  const double span = raw[best] - low;
  for (std::size_t i = 0; i < raw.size(); ++i) {
    if (raw[i] < 0) continue;
    if (i == best || (raw[i] == raw[best] && rank[i] == rank[best])) {
      out[i] = kMaxNodeScore;  // the best node (named twice in the input: the same answer)
    } else if (raw[i] == raw[best]) {
      out[i] = kMaxNodeScore - 1;  // as good, but the tie-break said no: still above the rest
    } else {
      // Strictly worse: 0..8, linear between the lowest score and the best.
      const double x = span > 0 ? (raw[i] - low) / span : 0.0;
      out[i] = std::min(kMaxNodeScore - 2, static_cast<int>(x * (kMaxNodeScore - 1)));
    }
  }
  return out;
}

std::vector<int> prioritize(const model::Cluster& cluster, const model::GpuRequest& req,
                            const Profile& profile, const std::vector<std::string>& nodes,
                            VerdictCache* cache) {
  std::vector<std::uint64_t> rank;
  rank.reserve(nodes.size());
  for (const std::string& n : nodes) rank.push_back(tie_break_rank(n));
  return normalize_scores(score_nodes(cluster, req, profile, nodes, cache), rank);
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
  a.priority = pod.priority;
  a.movable = pod.movable;
  a.started_unix_s = pod.started_unix_s;
  a.gpus = std::move(choice->gpus);
  a.mig = std::move(choice->mig);
  return a;
}

}  // namespace gapless::placement
