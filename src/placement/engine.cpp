#include "gapless/placement/engine.h"

#include <cmath>
#include <unordered_set>

#include "gapless/placement/choice.h"

namespace gapless::placement {

FilterResult filter(const model::Cluster& cluster, const model::GpuRequest& req,
                    const std::vector<std::string>& nodes) {
  FilterResult out;
  std::unordered_set<std::string> seen;
  for (const std::string& name : nodes) {
    if (!seen.insert(name).second) continue;
    const model::Node* node = cluster.find_node(name);
    if (node == nullptr) {
      if (req.kind == model::RequestKind::kNone) {
        out.passed.push_back(name);
        continue;
      }
      out.unresolvable[name] = "gapless: node is not in Gapless's inventory";
      out.labels[name] = "unknown_node";
      continue;
    }
    Fit fit = check_fit(*node, req);
    if (fit.fits()) {
      out.passed.push_back(name);
    } else {
      auto& bucket = fit.code == FitCode::kUnresolvable ? out.unresolvable : out.failed;
      bucket[name] = std::move(fit.reason);
      out.labels[name] = std::move(fit.label);
    }
  }
  return out;
}

// Weighted mean of the node-level strategies, the GPU-level score of the pick, and (for
// multi-GPU requests that care) the connectivity of the pick.
double score_node(const model::Node& node, const model::GpuRequest& req, const Profile& profile) {
  if (req.kind == model::RequestKind::kNone) return 0.0;
  const auto choice = choose(node, req, profile);
  if (!choice) return -1.0;
  double sum = 0, weights = 0;
  for (const WeightedStrategy& ws : profile.node) {
    sum += ws.weight * ws.strategy->score_node(node, req);
    weights += ws.weight;
  }
  sum += profile.gpu_weight * choice->gpu_score;
  weights += profile.gpu_weight;
  if (req.topology != model::TopologyWish::kNone && req.units() >= 2) {
    sum += profile.topology_weight * choice->connectivity;
    weights += profile.topology_weight;
  }
  return weights > 0 ? sum / weights : 0.0;
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
