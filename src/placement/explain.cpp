// Scheduler::explain: every extension point's answer per node, computed without caches.
#include <unordered_map>
#include <unordered_set>

#include "gapless/placement/explanation.h"
#include "gapless/placement/fit.h"
#include "gapless/placement/scheduler.h"

namespace gapless::placement {

namespace {

// Filter's verdict per node name.
std::unordered_map<std::string, const FilterResult::Rejection*> rejections(const FilterResult& r) {
  std::unordered_map<std::string, const FilterResult::Rejection*> out;
  for (const FilterResult::Rejection& x : r.rejected) out.emplace(x.node, &x);
  return out;
}

}  // namespace

std::vector<NodeExplanation> explain_nodes(const model::Cluster& cluster, const model::PodInfo& pod,
                                           const model::GpuRequest& req,
                                           const model::GpuRequest& fit, const Profile& drawn,
                                           const std::vector<std::string>& nodes,
                                           const FilterResult& filtered,
                                           const std::vector<double>& raw) {
  std::vector<std::uint64_t> rank;
  rank.reserve(nodes.size());
  for (const std::string& n : nodes) rank.push_back(tie_break_rank(n));
  const std::vector<int> normalized = normalize_scores(raw, rank);
  const auto rejected = rejections(filtered);
  std::unordered_set<std::string> done;
  std::vector<NodeExplanation> out;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    if (!done.insert(nodes[i]).second) continue;
    NodeExplanation& e = out.emplace_back();
    e.node = nodes[i];
    if (auto it = rejected.find(nodes[i]); it != rejected.end()) {
      const FilterResult::Reason& why = filtered.reasons[it->second->reason];
      e.verdict = why.unresolvable ? NodeExplanation::Verdict::kUnresolvable
                                   : NodeExplanation::Verdict::kFailed;
      e.reason = why.text;
      e.reason_label = std::string(why.label);
      continue;
    }
    const model::Node* node = cluster.find_node(nodes[i]);
    if (node == nullptr) continue;  // a pod without GPUs passes unknown nodes: nothing to score
    e.score = explain_fitting_node(*node, req, drawn);
    e.normalized = normalized[i];
    auto placed = place(cluster, fit, drawn, pod, nodes[i]);
    if (placed) {
      e.placement = std::move(*placed);
    } else {
      e.placement_error = placed.error();
    }
  }
  return out;
}

std::vector<NodeExplanation> Scheduler::explain(const model::PodInfo& pod,
                                                const model::GpuRequest& req,
                                                const Profile& profile,
                                                const std::vector<std::string>& nodes,
                                                std::uint64_t draw) const {
  Profile drawn = profile;  // the draw the random strategy reads, as score() gives it
  drawn.context.draw = draw;
  model::GpuRequest fit = req;
  if (!options_.check_host) fit.host = {};
  const auto loaded = policy();
  std::shared_lock lock(mu_);
  // No caches: an explanation must neither read stale entries nor leave any behind.
  FilterResult filtered = filter_locked(*loaded, pod, req, nodes, nullptr);
  std::vector<double> raw = score_nodes(cluster_, req, drawn, nodes, nullptr, options_.check_host);
  // Narrowed as filter(profile) narrows; prioritize then sees the kept nodes only.
  for (const auto& stage : stages_.ordered) {
    if (!stage->narrows(profile, filtered.passed.size())) continue;
    std::unordered_map<std::string, double> by_name;
    for (std::size_t i = 0; i < nodes.size(); ++i) by_name.emplace(nodes[i], raw[i]);
    std::vector<double> passed_raw;
    for (const std::string& n : filtered.passed) passed_raw.push_back(by_name.at(n));
    stage->narrow(profile, &filtered, nullptr, passed_raw);
    const std::unordered_set<std::string> kept(filtered.passed.begin(), filtered.passed.end());
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      if (kept.count(nodes[i]) == 0) raw[i] = -1;
    }
  }
  return explain_nodes(cluster_, pod, req, fit, drawn, nodes, filtered, raw);
}

}  // namespace gapless::placement
