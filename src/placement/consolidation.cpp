#include "gapless/placement/consolidation.h"

#include <algorithm>
#include <map>
#include <tuple>
#include <unordered_map>

#include "gapless/placement/choice.h"
#include "gapless/placement/engine.h"
#include "gapless/placement/fit.h"
#include "gapless/placement/preemption.h"
#include "victim_sets.h"

namespace gapless::placement {
namespace {

// One node where evicting some movable pods lets the pod fit: its pool, in UID order.
struct Site {
  const model::Node* node = nullptr;
  std::vector<const model::Allocation*> pool;
};

// A set of evictions on one site that frees enough room, with the header's choice order.
struct Option {
  std::size_t site = 0;
  std::vector<int> set;
  double gpu_seconds = 0;
  std::int64_t gpu_milli = 0;
  std::vector<std::string> uids;  // ascending, as `set` is
  auto key(const std::vector<Site>& sites) const {
    return std::tie(gpu_seconds, gpu_milli, sites[site].node->name, uids);
  }
};

bool withheld(const ConsolidationQuery& q, const std::string& node) {
  return std::find(q.withheld.begin(), q.withheld.end(), node) != q.withheld.end();
}

double seconds_lost(const model::Node& node, const model::Allocation& a,
                    const ConsolidationQuery& q) {
  const double started = q.started_at ? q.started_at(a) : -1;
  if (started < 0 || q.now_s <= started) return 0;
  return static_cast<double>(victim_gpu_milli(node, a)) / 1000.0 * (q.now_s - started);
}

// The nodes that can be freed for `req`, by name.
std::vector<Site> sites_for(const model::Cluster& cluster, const model::GpuRequest& req,
                            std::int32_t priority, const ConsolidationQuery& q) {
  std::unordered_map<std::string, std::vector<const model::Allocation*>> on_node;
  for (const model::Allocation* a : cluster.allocations()) {
    if (a->gpus.empty() && a->mig.empty()) continue;
    if (a->priority > priority || !is_movable(*a, q.rules)) continue;
    if (q.may_move && !q.may_move(*a)) continue;
    on_node[a->node].push_back(a);
  }
  std::vector<Site> sites;
  for (const model::Node* node : cluster.nodes()) {
    auto it = on_node.find(node->name);
    if (node->fenced() || it == on_node.end() || withheld(q, node->name)) continue;
    Site s{node, std::move(it->second)};
    std::sort(s.pool.begin(), s.pool.end(),
              [](const auto* x, const auto* y) { return x->pod_uid < y->pod_uid; });
    std::vector<int> all(s.pool.size());
    for (std::size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int>(i);
    if (detail::fits_without(*node, s.pool, all, req)) sites.push_back(std::move(s));
  }
  std::sort(sites.begin(), sites.end(),
            [](const Site& x, const Site& y) { return x.node->name < y.node->name; });
  return sites;
}

// Every set of exactly k evictions, over all sites, that frees enough room; false in *exhaustive
// when a site had too many sets of that size to try.
std::vector<Option> options_of_size(const std::vector<Site>& sites, std::size_t k,
                                    const model::GpuRequest& req, const ConsolidationQuery& q,
                                    bool* exhaustive) {
  std::vector<Option> out;
  for (std::size_t s = 0; s < sites.size(); ++s) {
    const Site& site = sites[s];
    const auto cap = static_cast<std::int64_t>(kMaxVictimSetsTried);
    if (detail::subsets_count(site.pool.size(), k, cap) > cap) {
      *exhaustive = false;
      continue;
    }
    detail::for_each_subset(site.pool.size(), k, [&](const std::vector<int>& set) {
      if (!detail::fits_without(*site.node, site.pool, set, req)) return true;
      Option o{s, set, 0, 0, {}};
      for (int i : set) {
        o.gpu_seconds += seconds_lost(*site.node, *site.pool[i], q);
        o.gpu_milli += victim_gpu_milli(*site.node, *site.pool[i]);
        o.uids.push_back(site.pool[i]->pod_uid);
      }
      out.push_back(std::move(o));
      return true;
    });
  }
  std::sort(out.begin(), out.end(),
            [&](const Option& x, const Option& y) { return x.key(sites) < y.key(sites); });
  return out;
}

// The engine's pick for one pod among `cluster`'s nodes but `target`, seeing `changed` (nodes
// the simulation already placed pods on) instead of the model's: the best score_fitting_node,
// ties to the lowest tie_break_rank, as Scheduler::normalize ranks them.
const model::Node* best_node(const model::Cluster& cluster, const std::string& target,
                             const std::map<std::string, model::Node>& changed,
                             const model::GpuRequest& req, const Profile& profile,
                             const ConsolidationQuery& q) {
  const model::Node* best = nullptr;
  double best_score = -1;
  std::uint64_t best_rank = 0;
  for (const model::Node* live : cluster.nodes()) {
    if (live->name == target || live->fenced() || withheld(q, live->name)) continue;
    auto it = changed.find(live->name);
    const model::Node& n = it == changed.end() ? *live : it->second;
    if (quick_fit(n, req).code != FitCode::kFits) continue;
    const double s = score_fitting_node(n, req, profile);
    const std::uint64_t rank = tie_break_rank(n.name);
    if (best == nullptr || s > best_score || (s == best_score && rank < best_rank)) {
      best = &n, best_score = s, best_rank = rank;
    }
  }
  return best;
}

// Places the evicted pods again, largest first, each seeing the ones before it; their moves
// (with `to`) in that order, or nullopt when one fits nowhere.
std::optional<std::vector<PlannedMove>> place_elsewhere(const model::Cluster& cluster,
                                                        const Site& site,
                                                        const std::vector<int>& set,
                                                        const Profile& profile,
                                                        const ConsolidationQuery& q) {
  std::vector<const model::Allocation*> evicted;
  for (int i : set) evicted.push_back(site.pool[i]);
  const model::Node& from = *site.node;
  std::stable_sort(evicted.begin(), evicted.end(), [&](const auto* x, const auto* y) {
    return victim_gpu_milli(from, *x) > victim_gpu_milli(from, *y);
  });
  std::map<std::string, model::Node> changed;
  std::vector<PlannedMove> moves;
  for (const model::Allocation* a : evicted) {
    std::optional<model::GpuRequest> req = q.request_of ? q.request_of(*a) : std::nullopt;
    if (!req) req = held_request(from, *a);
    if (!req) return std::nullopt;
    if (!q.check_host) req->host = {};
    const model::Node* to = best_node(cluster, from.name, changed, *req, profile, q);
    if (to == nullptr) return std::nullopt;
    const std::optional<Choice> choice = choose(*to, *req, profile);
    if (!choice) return std::nullopt;
    model::Allocation moved = *a;
    moved.node = to->name;
    moved.gpus = choice->gpus;
    moved.mig = choice->mig;
    moved.host = req->host;
    model::Node after = *to;  // `to` may point into `changed`: copy before replacing it
    if (!model::apply_allocation(after, moved, q.check_host)) return std::nullopt;
    changed.insert_or_assign(after.name, std::move(after));
    moves.push_back({a->pod_uid, a->pod_ns, a->pod_name, from.name, moved.node,
                     victim_gpu_milli(from, *a), seconds_lost(from, *a, q)});
  }
  return moves;
}

}  // namespace

bool is_movable(const model::Allocation& a, const ConsolidationRules& rules) {
  switch (a.movable) {
    case model::Movability::kOptedIn:
      return true;
    case model::Movability::kByPolicy:
      return rules.movable_below_priority && a.priority < *rules.movable_below_priority;
    case model::Movability::kNever:
      break;
  }
  return false;
}

ConsolidationSearch plan_consolidation(const model::Cluster& cluster, const model::GpuRequest& req,
                                       std::int32_t priority, const Profile& profile,
                                       const ConsolidationQuery& query) {
  ConsolidationSearch plan;
  if (req.kind == model::RequestKind::kNone) return plan;
  for (const model::Node* n : cluster.nodes()) {
    if (!n->fenced() && !withheld(query, n->name) && quick_fit(*n, req).code == FitCode::kFits) {
      plan.fits_now = true;
      return plan;
    }
  }
  const std::vector<Site> sites = sites_for(cluster, req, priority, query);
  plan.nodes_considered = sites.size();
  std::size_t checks = 0;
  const auto max_moves = static_cast<std::size_t>(query.rules.max_moves);
  for (std::size_t k = 1; k <= max_moves && !sites.empty(); ++k) {
    const std::vector<Option> options = options_of_size(sites, k, req, query, &plan.exhaustive);
    plan.sets_fitting += options.size();
    for (const Option& o : options) {
      const Site& site = sites[o.site];
      if (query.within_limits) {
        std::vector<const model::Allocation*> pods;
        for (int i : o.set) pods.push_back(site.pool[i]);
        if (!query.within_limits(pods)) {
          ++plan.sets_rate_limited;
          continue;
        }
      }
      if (++checks > kMaxPlacementChecks) {
        plan.exhaustive = false;
        return plan;
      }
      auto moves = place_elsewhere(cluster, site, o.set, profile, query);
      if (!moves) {
        ++plan.sets_unplaceable;
        continue;
      }
      plan.plan = ConsolidationPlan{site.node->name, std::move(*moves), o.gpu_milli, o.gpu_seconds};
      return plan;
    }
  }
  return plan;
}

}  // namespace gapless::placement
