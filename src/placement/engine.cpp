#include "gapless/placement/engine.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <string_view>
#include <unordered_set>

#include "gapless/placement/choice.h"

namespace gapless::placement {

// Duplicate names are rare; rather than hashing every name into a set (an allocation per node),
// passing nodes are deduplicated afterwards and rejections merge in their maps.
FilterResult filter(const model::Cluster& cluster, const model::GpuRequest& req,
                    const std::vector<std::string>& nodes) {
  FilterResult out;
  out.passed.reserve(nodes.size());
  // Reason texts depend only on the request: render each once per call.
  std::array<std::string, 16> reason_text;
  for (const std::string& name : nodes) {
    const model::Node* node = cluster.find_node(name);
    if (node == nullptr) {
      if (req.kind == model::RequestKind::kNone) {
        out.passed.push_back(name);
        continue;
      }
      out.unresolvable.emplace(name, "gapless: node is not in Gapless's inventory");
      out.labels.emplace(name, "unknown_node");
      continue;
    }
    const QuickFit fit = quick_fit(*node, req);
    if (fit.code == FitCode::kFits) {
      out.passed.push_back(name);
      continue;
    }
    std::string& text = reason_text[static_cast<std::size_t>(fit.why)];
    if (text.empty()) text = describe(fit.why, req);
    (fit.code == FitCode::kUnresolvable ? out.unresolvable : out.failed).emplace(name, text);
    out.labels.emplace(name, label(fit.why));
  }
  std::vector<std::string_view> sorted(out.passed.begin(), out.passed.end());
  std::sort(sorted.begin(), sorted.end());
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) {
    std::unordered_set<std::string> seen;
    std::erase_if(out.passed, [&](const std::string& n) { return !seen.insert(n).second; });
  }
  return out;
}

namespace {

bool topology_counts(const model::GpuRequest& req) {
  return req.topology != model::TopologyWish::kNone && req.units() >= 2;
}

// Weighted mean of the node-level strategies, the GPU-level score of the pick, and (for
// multi-GPU requests that care) the connectivity of the pick.
double weighted_score(const model::Node& node, const model::GpuRequest& req, const Profile& profile,
                      const double* gpu_score, double conn) {
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
    sum += profile.topology_weight * conn;
    weights += profile.topology_weight;
  }
  return weights > 0 ? sum / weights : 0.0;
}

}  // namespace

double score_node(const model::Node& node, const model::GpuRequest& req, const Profile& profile) {
  if (req.kind == model::RequestKind::kNone) return 0.0;
  double gpu_score = 0, conn = 1;
  if (!score_pick(node, req, profile, &gpu_score, &conn)) return -1.0;
  return weighted_score(node, req, profile, &gpu_score, conn);
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
                            const Profile& profile, const std::vector<std::string>& nodes) {
  std::vector<int> scores;
  scores.reserve(nodes.size());
  for (const std::string& name : nodes) {
    const model::Node* node = cluster.find_node(name);
    const double s = node == nullptr ? -1.0 : score_node(*node, req, profile);
    scores.push_back(s < 0 ? 0 : static_cast<int>(std::lround(10.0 * s)));
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
