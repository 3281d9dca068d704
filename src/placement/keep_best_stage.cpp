#include "gapless/placement/keep_best_stage.h"

#include <algorithm>
#include <functional>
#include <utility>

#include "gapless/placement/fit.h"

namespace gapless::placement {

namespace {

std::size_t keep_of(const Profile& profile) {
  return static_cast<std::size_t>(std::max(profile.keep_best, 0));
}

}  // namespace

bool KeepBestStage::narrows(const Profile& profile, std::size_t passed) const {
  const std::size_t keep = keep_of(profile);
  return keep != 0 && passed > keep;
}

void KeepBestStage::narrow(const Profile& profile, FilterResult* r,
                           std::vector<const model::Node*>* passed_nodes,
                           const std::vector<double>& raw) const {
  const std::size_t keep = keep_of(profile);
  if (keep == 0 || r->passed.size() <= keep) return;
  // The keep-th best score: nodes above it are kept; among those level with it, the lowest
  // tie-break ranks fill the remaining places (ranks are hashed for those nodes only).
  std::vector<double> sorted = raw;
  std::nth_element(sorted.begin(), sorted.begin() + static_cast<std::ptrdiff_t>(keep - 1),
                   sorted.end(), std::greater<>());
  const double threshold = sorted[keep - 1];
  std::vector<bool> kept(r->passed.size(), false);
  std::vector<std::pair<std::uint64_t, std::size_t>> level;  // (rank, index) at the threshold
  std::size_t places = keep;
  for (std::size_t i = 0; i < raw.size(); ++i) {
    if (raw[i] > threshold) {
      kept[i] = true;
      --places;
    } else if (raw[i] == threshold) {
      level.emplace_back(tie_break_rank(r->passed[i]), i);
    }
  }
  std::nth_element(level.begin(), level.begin() + static_cast<std::ptrdiff_t>(places - 1),
                   level.end());
  for (std::size_t i = 0; i < places; ++i) kept[level[i].second] = true;
  const std::size_t reason = r->reasons.size();
  // Short and the same for every node: the answer lists every narrowed-out node with it (at
  // 5,000 nodes a 100-byte text made a 560 KB filter answer for kube-scheduler to decode).
  r->reasons.push_back({"gapless: narrowed out by filter.keepBest", "narrowed", true});
  std::vector<std::string> passed;
  passed.reserve(keep);
  std::vector<const model::Node*> kept_nodes;
  for (std::size_t i = 0; i < r->passed.size(); ++i) {
    if (kept[i]) {
      passed.push_back(std::move(r->passed[i]));
      if (passed_nodes != nullptr) kept_nodes.push_back((*passed_nodes)[i]);
    } else {
      r->rejected.push_back({std::move(r->passed[i]), reason});
    }
  }
  r->passed = std::move(passed);
  if (passed_nodes != nullptr) *passed_nodes = std::move(kept_nodes);
}

}  // namespace gapless::placement
