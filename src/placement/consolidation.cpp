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

bool listed(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

bool withheld(const ConsolidationQuery& q, const std::string& node) {
  return listed(q.withheld, node);
}

double seconds_lost(const model::Node& node, const model::Allocation& a,
                    const ConsolidationQuery& q) {
  const double started = q.started_at ? q.started_at(a) : -1;
  if (started < 0 || q.now_s <= started) return 0;
  return static_cast<double>(victim_gpu_milli(node, a)) / 1000.0 * (q.now_s - started);
}

// The movable pods of each node, in UID order: those the rules let a pod of `priority` move.
using Pools = std::unordered_map<std::string, std::vector<const model::Allocation*>>;
Pools movable_pools(const model::Cluster& cluster, std::int32_t priority,
                    const ConsolidationQuery& q) {
  Pools on_node;
  for (const model::Allocation* a : cluster.allocations()) {
    if (a->gpus.empty() && a->mig.empty()) continue;
    if (a->priority > priority || !is_movable(*a, q.rules)) continue;
    if (q.may_move && !q.may_move(*a)) continue;
    on_node[a->node].push_back(a);
  }
  for (auto& [node, pool] : on_node) {
    std::sort(pool.begin(), pool.end(),
              [](const auto* x, const auto* y) { return x->pod_uid < y->pod_uid; });
  }
  return on_node;
}

// The nodes, but `excluded` ones, that can be freed for `req`, by name.
std::vector<Site> sites_for(const model::Cluster& cluster, const Pools& pools,
                            const model::GpuRequest& req, const ConsolidationQuery& q,
                            const std::vector<std::string>& excluded = {}) {
  std::vector<Site> sites;
  for (const model::Node* node : cluster.nodes()) {
    auto it = pools.find(node->name);
    if (node->fenced() || it == pools.end() || withheld(q, node->name)) continue;
    if (listed(excluded, node->name)) continue;
    std::vector<int> all(it->second.size());
    for (std::size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int>(i);
    if (detail::fits_without(*node, it->second, all, req)) sites.push_back({node, it->second});
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

// The engine's pick for one pod among `cluster`'s nodes but `excluded`, seeing `changed` (nodes
// the simulation already placed pods on) instead of the model's: the best score_fitting_node,
// ties to the lowest tie_break_rank, as Scheduler::normalize ranks them.
const model::Node* best_node(const model::Cluster& cluster,
                             const std::vector<std::string>& excluded,
                             const std::map<std::string, model::Node>& changed,
                             const model::GpuRequest& req, const Profile& profile,
                             const ConsolidationQuery& q) {
  const model::Node* best = nullptr;
  double best_score = -1;
  std::uint64_t best_rank = 0;
  for (const model::Node* live : cluster.nodes()) {
    if (live->fenced() || withheld(q, live->name) || listed(excluded, live->name)) continue;
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

// One simulation of evicting some pods and placing them again: the nodes it changed, the moves
// so far, and the budget it may still spend (evictions for chains, placement checks).
struct Simulation {
  const model::Cluster& cluster;
  const Pools& pools;
  const Profile& profile;
  const ConsolidationQuery& q;
  std::map<std::string, model::Node> changed;
  std::vector<PlannedMove> moves;
  std::size_t chain_moves = 0;  // evictions a chain may still add (0: no chains)
  std::size_t* checks = nullptr;
};

bool place_all(Simulation& sim, const model::Node& from, std::vector<const model::Allocation*> pods,
               const std::vector<std::string>& excluded);

// Puts `a` (asking `req`) on `to` in the simulation, recording its move from `from`.
bool put(Simulation& sim, const model::Node& from, const model::Allocation& a,
         const model::GpuRequest& req, const model::Node& to) {
  const std::optional<Choice> choice = choose(to, req, sim.profile);
  if (!choice) return false;
  model::Allocation moved = a;
  moved.node = to.name;
  moved.gpus = choice->gpus;
  moved.mig = choice->mig;
  moved.host = req.host;
  model::Node after = to;  // `to` may point into `changed`: copy before replacing it
  if (!model::apply_allocation(after, moved, sim.q.check_host)) return false;
  sim.changed.insert_or_assign(after.name, std::move(after));
  sim.moves.push_back({a.pod_uid, a.pod_ns, a.pod_name, from.name, moved.node,
                       victim_gpu_milli(from, a), seconds_lost(from, a, sim.q)});
  return true;
}

// A chain: `a` fits no node, so evict at most sim.chain_moves movable pods of one other node
// (not excluded, not changed by this simulation) that then fits it, each placed again elsewhere
// without a further chain; the fewest evictions, then the Option order. Each set tried is a
// placement check. On success `sim` holds the chain's moves and `a`'s.
bool chain(Simulation& sim, const model::Node& from, const model::Allocation& a,
           const model::GpuRequest& req, const std::vector<std::string>& excluded) {
  std::vector<std::string> skip = excluded;
  for (const auto& [name, node] : sim.changed) skip.push_back(name);
  const std::vector<Site> sites = sites_for(sim.cluster, sim.pools, req, sim.q, skip);
  bool exhaustive = true;
  for (std::size_t k = 1; k <= sim.chain_moves && !sites.empty(); ++k) {
    for (const Option& o : options_of_size(sites, k, req, sim.q, &exhaustive)) {
      if (++*sim.checks > kMaxChainChecks) return false;
      const Site& via = sites[o.site];
      Simulation sub = sim;
      sub.chain_moves = 0;  // one level: the chain's own pods take no chain
      std::vector<const model::Allocation*> pods;
      for (int i : o.set) pods.push_back(via.pool[i]);
      std::vector<std::string> sub_excluded = excluded;
      sub_excluded.push_back(via.node->name);
      if (!place_all(sub, *via.node, pods, sub_excluded)) continue;
      model::Node freed = *via.node;
      for (const model::Allocation* p : pods) model::unapply_allocation(freed, *p);
      if (!put(sub, from, a, req, freed)) continue;
      sim.changed = std::move(sub.changed);
      sim.moves = std::move(sub.moves);
      sim.chain_moves = 0;  // one chain per plan
      return true;
    }
  }
  return false;
}

// Places `pods` (evicted from `from`) again, largest first, each seeing the ones before it, on
// nodes but `excluded`; a pod that fits nowhere may take a chain while sim.chain_moves allows.
bool place_all(Simulation& sim, const model::Node& from, std::vector<const model::Allocation*> pods,
               const std::vector<std::string>& excluded) {
  std::stable_sort(pods.begin(), pods.end(), [&](const auto* x, const auto* y) {
    return victim_gpu_milli(from, *x) > victim_gpu_milli(from, *y);
  });
  for (const model::Allocation* a : pods) {
    std::optional<model::GpuRequest> req = sim.q.request_of ? sim.q.request_of(*a) : std::nullopt;
    if (!req) req = held_request(from, *a);
    if (!req) return false;
    if (!sim.q.check_host) req->host = {};
    const model::Node* to = best_node(sim.cluster, excluded, sim.changed, *req, sim.profile, sim.q);
    const bool placed = to != nullptr ? put(sim, from, *a, *req, *to)
                                      : sim.chain_moves > 0 && chain(sim, from, *a, *req, excluded);
    if (!placed) return false;
  }
  return true;
}

std::vector<const model::Allocation*> pods_of(const model::Cluster& cluster,
                                              const std::vector<PlannedMove>& moves) {
  std::vector<const model::Allocation*> pods;
  for (const PlannedMove& m : moves) pods.push_back(cluster.allocation(m.pod_uid));
  return pods;
}

// One pass over the eviction sets, fewest evictions first, then the Option order: without
// chains (counting the sets), or with them, a set of k evictions then taking a chain of at most
// max_moves - k more for a pod that fits nowhere. True when it found the plan.
bool search_pass(const model::Cluster& cluster, const Pools& pools, const std::vector<Site>& sites,
                 const model::GpuRequest& req, const Profile& profile, const ConsolidationQuery& q,
                 bool chains, std::size_t* checks, ConsolidationSearch* plan) {
  const auto max_moves = static_cast<std::size_t>(q.rules.max_moves);
  for (std::size_t k = 1; k <= max_moves && !sites.empty(); ++k) {
    if (chains && k == max_moves) break;  // no eviction left for a chain
    bool exhaustive = true;
    const std::vector<Option> options = options_of_size(sites, k, req, q, &exhaustive);
    if (!chains) plan->sets_fitting += options.size();
    plan->exhaustive = plan->exhaustive && exhaustive;
    for (const Option& o : options) {
      const Site& site = sites[o.site];
      std::vector<const model::Allocation*> pods;
      for (int i : o.set) pods.push_back(site.pool[i]);
      if (q.within_limits && !q.within_limits(pods)) {
        plan->sets_rate_limited += chains ? 0 : 1;
        continue;
      }
      if (++*checks > (chains ? kMaxChainChecks : kMaxPlacementChecks)) {
        plan->exhaustive = false;
        return false;
      }
      Simulation sim{cluster, pools, profile, q, {}, {}, chains ? max_moves - k : 0, checks};
      if (!place_all(sim, *site.node, pods, {site.node->name})) {
        plan->sets_unplaceable += chains ? 0 : 1;
        continue;
      }
      if (chains && q.within_limits && !q.within_limits(pods_of(cluster, sim.moves))) {
        ++plan->sets_rate_limited;
        continue;
      }
      ConsolidationPlan p{site.node->name, std::move(sim.moves), 0, 0};
      for (const PlannedMove& m : p.moves)
        p.gpu_milli += m.gpu_milli, p.gpu_seconds += m.gpu_seconds;
      plan->chained = chains;
      plan->plan = std::move(p);
      return true;
    }
  }
  return false;
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
  const Pools pools = movable_pools(cluster, priority, query);
  const std::vector<Site> sites = sites_for(cluster, pools, req, query);
  plan.nodes_considered = sites.size();
  std::size_t checks = 0;
  if (!search_pass(cluster, pools, sites, req, profile, query, false, &checks, &plan)) {
    std::size_t chain_checks = 0;  // the chains' own budget: at most twice one pass's cost
    search_pass(cluster, pools, sites, req, profile, query, true, &chain_checks, &plan);
  }
  return plan;
}

}  // namespace gapless::placement
