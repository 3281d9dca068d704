#include "node_search.h"

#include <algorithm>
#include <array>
#include <bit>

namespace gapless::placement {
namespace {

using Mask = std::uint64_t;

// Exhaustive search is used while the number of k-subsets stays under this bound; 8-GPU nodes
// (at most 70 subsets) always qualify, 16-GPU boxes for small and large k.
constexpr double kExhaustiveLimit = 5000;

double choose_count(int n, int k) {
  double c = 1;
  for (int i = 1; i <= k; ++i) c = c * (n - k + i) / i;
  return c;
}

// Enumerates k-subsets of the candidates keeping running sums, so each subset costs O(k) and
// nothing is allocated; only the best one is materialised at the end.
struct Search {
  const model::LinkGraph& links;
  const std::vector<int>& cand;
  const std::vector<double>& scores;
  int k;
  bool use_topology;
  bool required;
  bool break_ties = false;
  Mask all = 0;  // every candidate GPU (bit = GPU index)

  std::array<int, model::LinkGraph::kMaxGpus> pick{};
  std::array<int, model::LinkGraph::kMaxGpus> best_pick{};
  int depth = 0;
  double best_links = 0;
  double best_score = 0, best_conn = 1;
  int best_left = -1;  // clique left free by the best set (only with break_ties)
  bool found = false;

  double pairs() const { return k * (k - 1) / 2.0; }

  // Sets are ranked lexicographically: summed link weight (when connectivity matters), then the
  // GPU-level strategies' mean score, then (break_ties) the NVLink clique left free. Link weight
  // first means a multi-GPU pod never gets a worse-connected set than NVIDIA's besteffort policy
  // would give it, whatever the packing preference; packing decides among equally wired sets.
  void leaf(double score_sum, double link_sum) {
    const double mean = score_sum / k;
    const double links_key = use_topology ? link_sum : 0.0;
    int left = -1;
    if (found) {
      if (links_key < best_links - 1e-9) return;
      if (links_key < best_links + 1e-9) {
        if (mean < best_score - 1e-12) return;
        if (mean < best_score + 1e-12) {
          if (!break_ties) return;  // full tie: keep the earlier (lower-index) set
          left = clique_left();
          if (left <= best_left) return;
        }
      }
    }
    best_links = links_key;
    best_score = mean;
    best_conn =
        use_topology && k >= 2 ? std::min(1.0, link_sum / pairs() / model::Link::kMaxWeight) : 1.0;
    best_pick = pick;
    best_left = break_ties ? (left >= 0 ? left : clique_left()) : -1;
    found = true;
  }

  int clique_left() const {
    Mask taken = 0;
    for (int i = 0; i < k; ++i) taken |= Mask{1} << cand[pick[i]];
    return max_nvlink_clique(links, all & ~taken);
  }

  double links_to(int p) const {
    double w = 0;
    for (int i = 0; i < depth; ++i) w += links.weight(cand[pick[i]], cand[p]);
    return w;
  }

  // `nvlink_ok`: candidate positions NVLink-connected to every GPU picked so far.
  void exhaustive(int from, double score_sum, double link_sum, Mask nvlink_ok) {
    if (depth == k) return leaf(score_sum, link_sum);
    const int n = static_cast<int>(cand.size());
    for (int p = from; p <= n - (k - depth); ++p) {
      if (required && !(nvlink_ok & (Mask{1} << p))) continue;
      const double add = use_topology ? links_to(p) : 0.0;
      pick[depth++] = p;
      exhaustive(p + 1, score_sum + scores[p], link_sum + add,
                 required ? nvlink_ok & position_mask(cand[p]) : nvlink_ok);
      --depth;
    }
  }

  // Positions (into cand) of the NVLink neighbours of GPU `gpu`.
  Mask position_mask(int gpu) const {
    Mask m = 0;
    const Mask nv = links.nvlink_mask(gpu);
    for (std::size_t p = 0; p < cand.size(); ++p) {
      if (nv & (Mask{1} << cand[p])) m |= Mask{1} << p;
    }
    return m;
  }

  // Greedy growth from each seed: add the candidate that keeps the objective highest.
  void greedy() {
    const int n = static_cast<int>(cand.size());
    for (int seed = 0; seed < n; ++seed) {
      depth = 0;
      pick[depth++] = seed;
      Mask taken = Mask{1} << seed;
      double score_sum = scores[seed], link_sum = 0;
      while (depth < k) {
        int next = -1;
        double next_link = -1, next_score = -1;
        for (int p = 0; p < n; ++p) {
          if (taken & (Mask{1} << p)) continue;
          if (required && !all_linked(p)) continue;
          const double link = use_topology ? links_to(p) : 0.0;
          if (link > next_link + 1e-9 ||
              (link > next_link - 1e-9 && scores[p] > next_score + 1e-12)) {
            next = p;
            next_link = link;
            next_score = scores[p];
          }
        }
        if (next < 0) break;
        pick[depth++] = next;
        taken |= Mask{1} << next;
        score_sum += scores[next];
        link_sum += next_link;
      }
      if (depth == k) {
        std::sort(pick.begin(), pick.begin() + k);
        leaf(score_sum, link_sum);
      }
    }
  }

  bool all_linked(int p) const {
    const Mask nv = links.nvlink_mask(cand[p]);
    for (int i = 0; i < depth; ++i) {
      if (!(nv & (Mask{1} << cand[pick[i]]))) return false;
    }
    return true;
  }
};

}  // namespace

double connectivity(const model::Node& node, const std::vector<int>& gpus) {
  if (gpus.size() < 2) return 1.0;
  double sum = 0;
  int pairs = 0;
  for (std::size_t i = 0; i < gpus.size(); ++i) {
    for (std::size_t j = i + 1; j < gpus.size(); ++j) {
      sum += node.links.weight(gpus[i], gpus[j]);
      ++pairs;
    }
  }
  return std::min(1.0, sum / pairs / model::Link::kMaxWeight);
}

bool all_nvlink(const model::Node& node, const std::vector<int>& gpus) {
  for (std::size_t i = 0; i < gpus.size(); ++i) {
    for (std::size_t j = i + 1; j < gpus.size(); ++j) {
      if (!(node.links.nvlink_mask(gpus[i]) & (Mask{1} << gpus[j]))) return false;
    }
  }
  return true;
}

namespace {
// Branch and bound: take the lowest candidate (the rest must be its NVLink neighbours) or drop
// it; stop when even taking every remaining candidate cannot beat the best found.
void grow_clique(const model::LinkGraph& links, Mask cand, int size, int& best) {
  if (cand == 0) {
    best = std::max(best, size);
    return;
  }
  if (size + std::popcount(cand) <= best) return;
  const int v = std::countr_zero(cand);
  const Mask rest = cand & ~(Mask{1} << v);
  grow_clique(links, rest & links.nvlink_mask(v), size + 1, best);
  grow_clique(links, rest, size, best);
}
}  // namespace

int max_nvlink_clique(const model::LinkGraph& links, std::uint64_t candidates) {
  int best = 0;
  grow_clique(links, candidates, 0, best);
  return best;
}

// Branch on the lowest candidate: take it (the rest must be its NVLink neighbours) or drop it.
bool nvlink_clique_exists(const model::LinkGraph& links, std::uint64_t candidates, int k) {
  if (k <= 0) return true;
  if (std::popcount(candidates) < k) return false;
  if (k == 1) return true;
  const int v = std::countr_zero(candidates);
  const Mask rest = candidates & ~(Mask{1} << v);
  return nvlink_clique_exists(links, rest & links.nvlink_mask(v), k - 1) ||
         nvlink_clique_exists(links, rest, k);
}

namespace {

// Like nvlink_clique_exists, and the same branching, but returns the clique it finds (the
// lexicographically first one) in *out.
bool first_nvlink_clique(const model::LinkGraph& links, Mask candidates, int k, Mask chosen,
                         Mask* out) {
  if (k <= 0) {
    *out = chosen;
    return true;
  }
  if (std::popcount(candidates) < k) return false;
  const int v = std::countr_zero(candidates);
  const Mask bit = Mask{1} << v;
  const Mask rest = candidates & ~bit;
  return first_nvlink_clique(links, rest & links.nvlink_mask(v), k - 1, chosen | bit, out) ||
         first_nvlink_clique(links, rest, k, chosen, out);
}

}  // namespace

std::optional<GpuSet> best_set(const model::Node& node, const std::vector<int>& candidates,
                               const std::vector<double>& scores, int k, model::TopologyWish wish,
                               const Profile& profile, bool break_ties) {
  const int n = static_cast<int>(candidates.size());
  if (k <= 0 || n < k || n > model::LinkGraph::kMaxGpus) return std::nullopt;
  const bool use_topology = wish != model::TopologyWish::kNone && k >= 2;
  const bool required = wish == model::TopologyWish::kNvlinkRequired && k >= 2;
  (void)profile;  // weights matter for node scores, not for ranking sets (see Search::leaf)
  Search s{node.links, candidates, scores, k, use_topology, required};
  for (int c : candidates) s.all |= Mask{1} << c;
  const int clique_before = max_nvlink_clique(node.links, s.all);
  s.break_ties = break_ties && clique_before >= 2;
  if (!use_topology && k == 1 && s.break_ties) {
    // One GPU: every candidate is a set of its own, so ties can be broken by what is left.
    for (int p = 0; p < n; ++p) {
      s.pick[0] = p;
      s.depth = 1;
      s.leaf(scores[p], 0);
    }
  } else if (!use_topology) {
    // Connectivity does not matter: the k best-scored GPUs (stable: lower index wins ties).
    std::array<int, model::LinkGraph::kMaxGpus> order{};
    for (int i = 0; i < n; ++i) order[i] = i;
    std::stable_sort(order.begin(), order.begin() + n,
                     [&](int a, int b) { return scores[a] > scores[b] + 1e-12; });
    std::sort(order.begin(), order.begin() + k);
    double sum = 0;
    for (int i = 0; i < k; ++i) sum += scores[order[i]];
    s.pick = order;
    s.leaf(sum, 0);
  } else if (choose_count(n, k) <= kExhaustiveLimit) {
    s.exhaustive(0, 0.0, 0.0, n == 64 ? ~Mask{0} : (Mask{1} << n) - 1);
  } else {
    s.greedy();
    if (required && !s.found) {
      // Greedy growth can commit to a GPU that leaves no way to complete an NVLink set even
      // though one exists, and check_fit (exact) has already said one does: take the first
      // NVLink clique among the candidates so a node that passed filter always gets a pick.
      Mask cand_mask = 0;
      for (int p = 0; p < n; ++p) cand_mask |= Mask{1} << candidates[p];
      Mask clique = 0;
      if (first_nvlink_clique(node.links, cand_mask, k, 0, &clique)) {
        double score_sum = 0, link_sum = 0;
        s.depth = 0;
        for (int p = 0; p < n; ++p) {
          if (!(clique & (Mask{1} << candidates[p]))) continue;
          link_sum += s.links_to(p);
          score_sum += scores[p];
          s.pick[s.depth++] = p;
        }
        s.leaf(score_sum, link_sum);
      }
    }
  }
  if (!s.found) return std::nullopt;
  GpuSet out;
  Mask taken = 0;
  for (int i = 0; i < k; ++i) {
    out.gpus.push_back(candidates[s.best_pick[i]]);
    taken |= Mask{1} << candidates[s.best_pick[i]];
  }
  out.gpu_score = s.best_score;
  out.connectivity = s.best_conn;
  if (clique_before >= 2) {
    // Only the shrink a better pick could have avoided counts: with fewer free GPUs outside the
    // largest island than the pod needs (an NVSwitch node, where every GPU is in it), taking
    // from the island is forced, and the GPUs left are as well connected as they can be.
    const int after = max_nvlink_clique(node.links, s.all & ~taken);
    const int outside = std::popcount(s.all) - clique_before;
    const int forced = std::max(0, k - outside);
    const int avoidable = std::max(0, clique_before - after - forced);
    out.island_kept = 1.0 - static_cast<double>(avoidable) / k;
  }
  return out;
}

}  // namespace gapless::placement
