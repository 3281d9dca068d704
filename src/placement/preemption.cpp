#include "gapless/placement/preemption.h"

#include <algorithm>
#include <limits>
#include <set>
#include <tuple>
#include <unordered_map>

#include "gapless/model/cluster.h"
#include "gapless/placement/fit.h"
#include "victim_sets.h"

namespace gapless::placement {
namespace {

// One pod that may be evicted for its GPUs.
struct Candidate {
  const model::Allocation* a = nullptr;
  std::int64_t milli = 0;
  bool proposed = false;
};

// The choice order of the header, lowest first (UIDs last: the candidates' order breaks ties).
struct SetKey {
  int violations = 0;
  std::size_t pods = 0;
  int unproposed = 0;
  std::int32_t max_priority = std::numeric_limits<std::int32_t>::min();
  std::int64_t sum_priority = 0;
  std::int64_t milli = 0;
  auto tie() const {
    return std::tie(violations, pods, unproposed, max_priority, sum_priority, milli);
  }
  bool operator<(const SetKey& o) const { return tie() < o.tie(); }
};

int set_violations(const std::vector<Candidate>& pool, const std::vector<int>& set,
                   const std::vector<DisruptionBudget>& budgets) {
  if (budgets.empty()) return 0;
  std::vector<std::pair<std::int32_t, std::string>> v;
  for (int i : set) v.emplace_back(pool[i].a->priority, pool[i].a->pod_uid);
  return pdb_violations(std::move(v), budgets);
}

SetKey key_of(const std::vector<Candidate>& pool, const std::vector<int>& set,
              const std::vector<DisruptionBudget>& budgets) {
  SetKey k;
  k.violations = set_violations(pool, set, budgets);
  k.pods = set.size();
  for (int i : set) {
    const Candidate& c = pool[i];
    k.unproposed += c.proposed ? 0 : 1;
    k.max_priority = std::max(k.max_priority, c.a->priority);
    k.sum_priority += c.a->priority;
    k.milli += c.milli;
  }
  return k;
}

// Does the request fit `node` once the pods of `set` are gone?
bool fits_without(const model::Node& node, const std::vector<Candidate>& pool,
                  const std::vector<int>& set, const model::GpuRequest& req) {
  std::vector<const model::Allocation*> held;
  held.reserve(pool.size());
  for (const Candidate& c : pool) held.push_back(c.a);
  return detail::fits_without(node, held, set, req);
}

std::int64_t binomial(std::size_t n, std::size_t k) {
  return detail::subsets_count(n, k, static_cast<std::int64_t>(kMaxVictimSetsTried));
}

// The best fitting set of exactly k candidates, by SetKey; empty when none fits.
std::vector<int> best_of_size(const model::Node& node, const std::vector<Candidate>& pool,
                              std::size_t k, const model::GpuRequest& req,
                              const std::vector<DisruptionBudget>& budgets) {
  std::vector<int> best;
  SetKey best_key;
  detail::for_each_subset(pool.size(), k, [&](const std::vector<int>& set) {
    if (fits_without(node, pool, set, req)) {
      const SetKey key = key_of(pool, set, budgets);
      if (best.empty() || key < best_key) best = set, best_key = key;
    }
    return true;
  });
  return best;
}

// Which candidates violate a budget when all are victims (kube-scheduler's
// filterPodsWithPDBViolation over every lower-priority pod): most important first, each taking
// one disruption from every budget covering it.
std::vector<bool> violators(const std::vector<Candidate>& pool,
                            const std::vector<DisruptionBudget>& budgets) {
  std::vector<bool> out(pool.size(), false);
  if (budgets.empty()) return out;
  std::vector<int> order(pool.size());
  for (std::size_t i = 0; i < pool.size(); ++i) order[i] = static_cast<int>(i);
  std::sort(order.begin(), order.end(), [&](int x, int y) {
    return std::make_tuple(-static_cast<std::int64_t>(pool[x].a->priority), pool[x].a->pod_uid) <
           std::make_tuple(-static_cast<std::int64_t>(pool[y].a->priority), pool[y].a->pod_uid);
  });
  std::vector<std::int64_t> left;
  for (const DisruptionBudget& b : budgets) left.push_back(b.allowed);
  for (int i : order) {
    for (std::size_t b = 0; b < budgets.size(); ++b) {
      if (budgets[b].pods.count(pool[i].a->pod_uid) != 0 && --left[b] < 0) out[i] = true;
    }
  }
  return out;
}

// Evict every candidate, then spare them one by one while the pod still fits: first those whose
// eviction would violate a budget, then the others (kube-scheduler's reprieve order), each group
// most important first (highest priority, most GPU work, unproposed).
std::vector<int> greedy(const model::Node& node, const std::vector<Candidate>& pool,
                        const model::GpuRequest& req,
                        const std::vector<DisruptionBudget>& budgets) {
  std::vector<int> order(pool.size());
  for (std::size_t i = 0; i < pool.size(); ++i) order[i] = static_cast<int>(i);
  const std::vector<bool> violating = violators(pool, budgets);
  std::stable_sort(order.begin(), order.end(), [&](int x, int y) {
    const Candidate& a = pool[x];
    const Candidate& b = pool[y];
    return std::make_tuple(!violating[x], -static_cast<std::int64_t>(a.a->priority), -a.milli,
                           a.proposed) < std::make_tuple(!violating[y],
                                                         -static_cast<std::int64_t>(b.a->priority),
                                                         -b.milli, b.proposed);
  });
  std::set<int> evicted(order.begin(), order.end());
  for (int i : order) {
    evicted.erase(i);
    if (!fits_without(node, pool, std::vector<int>(evicted.begin(), evicted.end()), req)) {
      evicted.insert(i);
    }
  }
  return {evicted.begin(), evicted.end()};
}

// Candidates: pods below `priority` holding GPUs or MIG instances here, in a fixed order.
std::vector<Candidate> candidates(const model::Node& node,
                                  const std::vector<const model::Allocation*>& on_node,
                                  std::int32_t priority, const std::set<std::string>& proposed) {
  std::vector<Candidate> pool;
  for (const model::Allocation* a : on_node) {
    if (a->priority >= priority || (a->gpus.empty() && a->mig.empty())) continue;
    pool.push_back({a, victim_gpu_milli(node, *a), proposed.count(a->pod_uid) != 0});
  }
  std::sort(pool.begin(), pool.end(), [](const Candidate& x, const Candidate& y) {
    return std::tie(x.a->priority, x.milli, x.a->pod_uid) <
           std::tie(y.a->priority, y.milli, y.a->pod_uid);
  });
  return pool;
}

int mig_compute_slices(const std::string& profile) {
  // "3g.40gb" -> 3, "1g.10gb+me" -> 1; the profile table is per family, the prefix is not.
  int slices = 0;
  for (char c : profile) {
    if (c < '0' || c > '9') break;
    slices = slices * 10 + (c - '0');
    if (slices > model::kMigComputeSlices) break;
  }
  return slices;
}

}  // namespace

std::int64_t victim_gpu_milli(const model::Node& node, const model::Allocation& a) {
  std::int64_t total = 0;
  for (const model::GpuGrant& g : a.gpus) {
    if (g.whole()) {
      total += model::kFullComputeMilli;
      continue;
    }
    std::int64_t share = g.compute_milli;
    const bool known = g.index >= 0 && static_cast<std::size_t>(g.index) < node.gpus.size();
    const model::Gpu* gpu = known ? &node.gpus[g.index] : nullptr;
    if (gpu != nullptr && gpu->memory_mib > 0) {
      share = std::max(share, g.memory_mib * model::kFullComputeMilli / gpu->memory_mib);
    }
    if (gpu != nullptr && gpu->gpushare_capacity > 0) {
      share = std::max(share, g.gpushare_units * model::kFullComputeMilli / gpu->gpushare_capacity);
    }
    total += share;
  }
  for (const model::MigGrant& m : a.mig) {
    total += mig_compute_slices(m.profile) * model::kFullComputeMilli / model::kMigComputeSlices;
  }
  return total;
}

namespace {

// The GPU-holding victims: the smallest set by SetKey, within the search bound.
// Sets are tried by size; with budgets a larger set may violate fewer, so every size within the
// bound is tried and the best by SetKey kept.
std::vector<int> gpu_victims(const model::Node& node, const std::vector<Candidate>& pool,
                             const model::GpuRequest& req,
                             const std::vector<DisruptionBudget>& budgets, bool* exhaustive) {
  std::int64_t tried = 0;
  std::vector<int> best;
  SetKey best_key;
  for (std::size_t k = 1; k <= pool.size(); ++k) {
    tried += binomial(pool.size(), k);
    if (tried > static_cast<std::int64_t>(kMaxVictimSetsTried)) break;
    std::vector<int> set = best_of_size(node, pool, k, req, budgets);
    if (set.empty()) continue;
    const SetKey key = key_of(pool, set, budgets);
    if (best.empty() || key < best_key) best = std::move(set), best_key = key;
    if (best_key.violations == 0) return best;  // larger sets can only rank lower
  }
  if (!best.empty() && tried <= static_cast<std::int64_t>(kMaxVictimSetsTried)) return best;
  *exhaustive = false;
  std::vector<int> g = greedy(node, pool, req, budgets);
  if (!best.empty() && key_of(pool, best, budgets) < key_of(pool, g, budgets)) return best;
  return g;
}

// Orders the answer: highest priority first, then UID.
void order_victims(std::vector<std::pair<std::int64_t, std::string>>& v) {
  std::sort(v.begin(), v.end(), [](const auto& x, const auto& y) {
    return x.first != y.first ? x.first > y.first : x.second < y.second;
  });
}

}  // namespace

std::optional<VictimChoice> select_victims(const model::Node& node,
                                           const std::vector<const model::Allocation*>& on_node,
                                           const model::GpuRequest& req, std::int32_t priority,
                                           const std::vector<ProposedVictim>& proposed,
                                           const std::vector<DisruptionBudget>& budgets) {
  if (node.fenced()) return std::nullopt;  // its allocations may be stranded: never unapply
  std::set<std::string> proposed_uids;
  for (const ProposedVictim& p : proposed) proposed_uids.insert(p.uid);
  const std::vector<Candidate> pool = candidates(node, on_node, priority, proposed_uids);
  std::vector<int> all(pool.size());
  for (std::size_t i = 0; i < pool.size(); ++i) all[i] = static_cast<int>(i);
  if (!fits_without(node, pool, all, req)) return std::nullopt;

  VictimChoice out;
  std::vector<int> chosen;
  if (!fits_without(node, pool, {}, req))
    chosen = gpu_victims(node, pool, req, budgets, &out.exhaustive);

  std::unordered_map<std::string, const model::Allocation*> here;
  for (const model::Allocation* a : on_node) here.emplace(a->pod_uid, a);
  std::vector<std::pair<std::int64_t, std::string>> victims;
  for (int i : chosen) {
    victims.emplace_back(pool[i].a->priority, pool[i].a->pod_uid);
    out.unproposed += pool[i].proposed ? 0 : 1;
    out.gpu_milli += pool[i].milli;
  }
  // kube-scheduler's own victims: all of them when the GPUs fit as they are (it evicts for
  // something else), else those holding no GPU here (CPU, memory: not Gapless's to judge).
  std::set<std::string> taken;
  for (const auto& v : victims) taken.insert(v.second);
  for (const ProposedVictim& p : proposed) {
    auto it = here.find(p.uid);
    const model::Allocation* a = it == here.end() ? nullptr : it->second;
    const bool holds_gpus = a != nullptr && (!a->gpus.empty() || !a->mig.empty());
    if (!chosen.empty() && holds_gpus) continue;
    // Unknown: at most one below the preemptor's (kube-scheduler proposes only lower ones).
    const std::int64_t prio = p.priority     ? *p.priority
                              : a != nullptr ? a->priority
                                             : std::int64_t{priority} - 1;
    if (prio >= priority || !taken.insert(p.uid).second) continue;
    victims.emplace_back(prio, p.uid);
  }
  order_victims(victims);
  if (!budgets.empty()) {
    std::vector<std::pair<std::int32_t, std::string>> all;
    for (const auto& [prio, uid] : victims) all.emplace_back(static_cast<std::int32_t>(prio), uid);
    out.pdb_violations = pdb_violations(std::move(all), budgets);
  }
  for (auto& v : victims) out.victims.push_back(std::move(v.second));
  return out;
}

int pdb_violations(std::vector<std::pair<std::int32_t, std::string>> victims,
                   const std::vector<DisruptionBudget>& budgets) {
  std::sort(victims.begin(), victims.end(), [](const auto& x, const auto& y) {
    return x.first != y.first ? x.first > y.first : x.second < y.second;
  });
  std::vector<std::int64_t> left;
  for (const DisruptionBudget& b : budgets) left.push_back(b.allowed);
  int violations = 0;
  for (const auto& v : victims) {
    bool violates = false;
    for (std::size_t i = 0; i < budgets.size(); ++i) {
      if (budgets[i].pods.count(v.second) == 0) continue;
      if (--left[i] < 0) violates = true;
    }
    violations += violates ? 1 : 0;
  }
  return violations;
}

}  // namespace gapless::placement
