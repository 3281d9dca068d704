#include "gapless/placement/choice.h"

#include "gapless/placement/demand.h"
#include "mig_choice.h"
#include "node_search.h"

namespace gapless::placement {

double gpu_level_score(const Profile& profile, const model::Node& node, const model::Gpu& gpu,
                       const model::GpuRequest& req) {
  double sum = 0, weights = 0;
  for (const WeightedStrategy& ws : profile.gpu) {
    sum += ws.weight * ws.strategy->score_gpu_in(profile.context, node, gpu, req);
    weights += ws.weight;
  }
  return weights > 0 ? sum / weights : 0.0;
}

namespace {

// Candidate GPUs that can take the request now, with their GPU-level scores.
void candidates_of(const model::Node& node, const model::GpuRequest& req, const Profile& profile,
                   std::vector<int>& candidates, std::vector<double>& scores) {
  candidates.clear();
  scores.clear();
  for (const model::Gpu& g : node.gpus) {
    if (!can_serve_now(g, req)) continue;
    candidates.push_back(g.index);
    scores.push_back(gpu_level_score(profile, node, g, req));
  }
}

}  // namespace

bool score_pick(const model::Node& node, const model::GpuRequest& req, const Profile& profile,
                double* gpu_score, double* connectivity, double* island_kept) {
  if (island_kept != nullptr) *island_kept = 1.0;
  if (node.fenced()) return false;
  if (req.kind == model::RequestKind::kMig) {
    auto mig = choose_mig(node, req, profile);
    if (!mig) return false;
    *gpu_score = mig->gpu_score;
    *connectivity = 1.0;
    return true;
  }
  if (req.kind == model::RequestKind::kNone) return false;
  // Reused per thread: scoring thousands of nodes should not allocate for each.
  thread_local std::vector<int> candidates;
  thread_local std::vector<double> scores;
  candidates_of(node, req, profile, candidates, scores);
  auto set = best_set(node, candidates, scores, req.units(), req.topology, profile,
                      /*break_ties=*/island_kept != nullptr);
  if (!set) return false;
  *gpu_score = set->gpu_score;
  *connectivity = set->connectivity;
  if (island_kept != nullptr) *island_kept = set->island_kept;
  return true;
}

std::optional<Choice> choose(const model::Node& node, const model::GpuRequest& req,
                             const Profile& profile) {
  if (node.fenced()) return std::nullopt;
  if (req.kind == model::RequestKind::kMig) {
    auto mig = choose_mig(node, req, profile);
    if (!mig) return std::nullopt;
    return Choice{{}, std::move(mig->grants), mig->gpu_score, 1.0};
  }
  if (req.kind == model::RequestKind::kNone) return Choice{};

  std::vector<int> candidates;
  std::vector<double> scores;
  candidates_of(node, req, profile, candidates, scores);
  // The pick that is kept: among equally good sets, break the fewest NVLink islands.
  auto set = best_set(node, candidates, scores, req.units(), req.topology, profile,
                      /*break_ties=*/true);
  if (!set) return std::nullopt;

  Choice c;
  c.gpu_score = set->gpu_score;
  c.connectivity = set->connectivity;
  for (int i : set->gpus) {
    model::GpuGrant g;
    g.index = i;
    g.uuid = node.gpus[i].uuid;
    if (req.kind == model::RequestKind::kShared) {
      g.memory_mib = req.shared.memory_mib;
      g.compute_milli = req.shared.compute_milli;
    } else if (req.kind == model::RequestKind::kGpushare) {
      g.gpushare_units = req.gpushare_units;
    }
    c.gpus.push_back(std::move(g));
  }
  return c;
}

}  // namespace gapless::placement
