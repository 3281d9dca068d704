#include "node_search.h"

#include <algorithm>

namespace gapless::placement {
namespace {

// Exhaustive search is used while the number of k-subsets stays under this bound; 8-GPU nodes
// (at most 70 subsets) always qualify, 16-GPU boxes for small and large k.
constexpr double kExhaustiveLimit = 5000;

double choose_count(int n, int k) {
  double c = 1;
  for (int i = 1; i <= k; ++i) c = c * (n - k + i) / i;
  return c;
}

struct Search {
  const model::Node& node;
  const std::vector<int>& cand;
  const std::vector<double>& scores;
  int k;
  bool use_topology;
  bool required;
  double gw, tw;

  std::optional<GpuSet> best;
  double best_obj = -1;
  std::vector<int> pick;  // positions into cand

  void consider() {
    std::vector<int> gpus;
    double sum = 0;
    for (int p : pick) {
      gpus.push_back(cand[p]);
      sum += scores[p];
    }
    const double conn = use_topology ? connectivity(node, gpus) : 1.0;
    const double mean = sum / k;
    const double obj = gw * mean + (use_topology ? tw * conn : 0.0);
    if (obj > best_obj + 1e-12) {  // strict: ties keep the earlier (lower-index) set
      best_obj = obj;
      best = GpuSet{gpus, mean, conn};
    }
  }

  bool joins_nvlink(int p) const {
    for (int q : pick) {
      if (!node.links.get(cand[q], cand[p]).is_nvlink()) return false;
    }
    return true;
  }

  void exhaustive(int from) {
    if (static_cast<int>(pick.size()) == k) return consider();
    for (int p = from; p < static_cast<int>(cand.size()); ++p) {
      if (static_cast<int>(cand.size()) - p < k - static_cast<int>(pick.size())) break;
      if (required && !joins_nvlink(p)) continue;
      pick.push_back(p);
      exhaustive(p + 1);
      pick.pop_back();
    }
  }

  // Greedy growth from each seed: add the candidate that keeps the objective highest.
  void greedy() {
    for (int seed = 0; seed < static_cast<int>(cand.size()); ++seed) {
      pick = {seed};
      while (static_cast<int>(pick.size()) < k) {
        int next = -1;
        double next_val = -1;
        for (int p = 0; p < static_cast<int>(cand.size()); ++p) {
          if (std::find(pick.begin(), pick.end(), p) != pick.end()) continue;
          if (required && !joins_nvlink(p)) continue;
          double link = 0;
          for (int q : pick) link += node.links.get(cand[q], cand[p]).weight() / 100.0;
          const double val = gw * scores[p] + (use_topology ? tw * link / pick.size() : 0.0);
          if (val > next_val + 1e-12) {
            next_val = val;
            next = p;
          }
        }
        if (next < 0) break;
        pick.push_back(next);
      }
      if (static_cast<int>(pick.size()) == k) {
        std::sort(pick.begin(), pick.end());
        consider();
      }
    }
  }
};

}  // namespace

double connectivity(const model::Node& node, const std::vector<int>& gpus) {
  if (gpus.size() < 2) return 1.0;
  double sum = 0;
  int pairs = 0;
  for (std::size_t i = 0; i < gpus.size(); ++i) {
    for (std::size_t j = i + 1; j < gpus.size(); ++j) {
      sum += node.links.get(gpus[i], gpus[j]).weight();
      ++pairs;
    }
  }
  return sum / pairs / 100.0;
}

bool all_nvlink(const model::Node& node, const std::vector<int>& gpus) {
  for (std::size_t i = 0; i < gpus.size(); ++i) {
    for (std::size_t j = i + 1; j < gpus.size(); ++j) {
      if (!node.links.get(gpus[i], gpus[j]).is_nvlink()) return false;
    }
  }
  return true;
}

std::optional<GpuSet> best_set(const model::Node& node, const std::vector<int>& candidates,
                               const std::vector<double>& scores, int k,
                               model::TopologyWish wish, const Profile& profile) {
  const int n = static_cast<int>(candidates.size());
  if (k <= 0 || n < k) return std::nullopt;
  const bool use_topology = wish != model::TopologyWish::kNone && k >= 2;
  const bool required = wish == model::TopologyWish::kNvlinkRequired && k >= 2;
  Search s{node, candidates, scores, k, use_topology, required,
           profile.gpu_weight, profile.topology_weight, std::nullopt, -1, {}};
  if (!use_topology) {
    // Connectivity does not matter: the k best-scored GPUs (stable: lower index wins ties).
    std::vector<int> order(n);
    for (int i = 0; i < n; ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(),
                     [&](int a, int b) { return scores[a] > scores[b] + 1e-12; });
    s.pick.assign(order.begin(), order.begin() + k);
    std::sort(s.pick.begin(), s.pick.end());
    s.consider();
    return s.best;
  }
  if (choose_count(n, k) <= kExhaustiveLimit) {
    s.exhaustive(0);
  } else {
    s.greedy();
  }
  return s.best;
}

}  // namespace gapless::placement
