// Consolidation's rules around the search (placement/consolidation.h): the request an evicted pod
// is placed again with when the driver has none, and the ledger behind the rate limits.
#include <algorithm>
#include <iomanip>
#include <map>
#include <sstream>

#include "gapless/placement/consolidation.h"

namespace gapless::placement {
namespace {

constexpr double kRateWindowS = 60;

bool all_nvlinked(const model::Node& node, const std::vector<model::GpuGrant>& gpus) {
  for (std::size_t i = 0; i < gpus.size(); ++i) {
    for (std::size_t j = i + 1; j < gpus.size(); ++j) {
      const int a = gpus[i].index, b = gpus[j].index;
      if (a < 0 || b < 0 || a >= node.links.size() || b >= node.links.size() || b >= 64) {
        return false;
      }
      if ((node.links.nvlink_mask(a) >> b & 1U) == 0) return false;
    }
  }
  return true;
}

std::optional<model::GpuRequest> held_gpus(const model::Node& node, const model::Allocation& a) {
  model::GpuRequest r;
  const model::GpuGrant& first = a.gpus.front();
  for (const model::GpuGrant& g : a.gpus) {
    const bool same = g.memory_mib == first.memory_mib && g.compute_milli == first.compute_milli &&
                      g.gpushare_units == first.gpushare_units;
    if (!same) return std::nullopt;
  }
  const int count = static_cast<int>(a.gpus.size());
  if (first.whole()) {
    r.kind = model::RequestKind::kWhole;
    r.whole = count;
    if (count >= 2) {
      r.topology = all_nvlinked(node, a.gpus) ? model::TopologyWish::kNvlinkRequired
                                              : model::TopologyWish::kNvlinkPreferred;
    }
  } else if (first.gpushare_units > 0) {
    if (count != 1) return std::nullopt;
    r.kind = model::RequestKind::kGpushare;
    r.gpushare_units = first.gpushare_units;
  } else {
    r.kind = model::RequestKind::kShared;
    r.shared = {first.memory_mib, first.compute_milli, count};
  }
  const bool known = first.index >= 0 && static_cast<std::size_t>(first.index) < node.gpus.size();
  if (known) r.models = {node.gpus[first.index].model};
  return r;
}

}  // namespace

std::optional<model::GpuRequest> held_request(const model::Node& node, const model::Allocation& a) {
  if (a.gpus.empty() == a.mig.empty()) return std::nullopt;  // nothing, or both kinds
  std::optional<model::GpuRequest> r;
  if (!a.gpus.empty()) {
    r = held_gpus(node, a);
  } else {
    const std::string& profile = a.mig.front().profile;
    for (const model::MigGrant& m : a.mig) {
      if (m.profile != profile) return std::nullopt;
    }
    r.emplace();
    r->kind = model::RequestKind::kMig;
    r->mig_profile = profile;
    r->mig_count = static_cast<int>(a.mig.size());
  }
  if (r) r->host = a.host;
  return r;
}

std::string describe(const ConsolidationSearch& s, const ConsolidationRules& rules) {
  if (!rules.enabled) return "consolidation is off in the policy";
  if (s.fits_now) return "a node fits the pod now: nothing to move";
  std::ostringstream o;
  o << s.nodes_considered << " node(s) could be freed by movable pods; " << s.sets_fitting
    << " eviction set(s) free enough room, " << s.sets_unplaceable
    << " refused (a pod could not be placed elsewhere), " << s.sets_rate_limited
    << " over the rate limits" << (s.exhaustive ? "" : " (search bound reached)");
  if (!s.plan) {
    o << "; no plan within " << rules.max_moves << " eviction(s)";
    return o.str();
  }
  const ConsolidationPlan& p = *s.plan;
  const auto elsewhere = std::count_if(p.moves.begin(), p.moves.end(),
                                       [&](const PlannedMove& m) { return m.from != p.node; });
  o << std::fixed << std::setprecision(2) << "; chosen: evict " << p.moves.size() << " pod(s) from "
    << p.node;
  if (s.chained) {
    o << " (a chain: " << elsewhere
      << " of them from another node, to make room for a pod moved off it; no plan without one)";
  }
  o << ", the fewest evictions, then the least GPU-time lost (" << p.gpu_seconds / 3600
    << " GPU-hours, " << static_cast<double>(p.gpu_milli) / 1000 << " GPUs of work held)"
    << (rules.dry_run ? "; dry run: nothing is evicted" : "");
  return o.str();
}

bool MoveLedger::cooling_down(const std::string& pod_uid, double now_s,
                              const ConsolidationRules& rules) const {
  return std::any_of(moves_.begin(), moves_.end(), [&](const Moved& m) {
    return m.uid == pod_uid && now_s - m.at < rules.pod_cooldown_s;
  });
}

bool MoveLedger::allows(const std::vector<const model::Allocation*>& pods, double now_s,
                        const ConsolidationRules& rules) const {
  std::size_t recent = 0;
  std::map<std::string, std::size_t> per_ns;
  for (const Moved& m : moves_) {
    if (now_s - m.at >= kRateWindowS) continue;
    ++recent;
    ++per_ns[m.ns];
  }
  for (const model::Allocation* a : pods) ++per_ns[a->pod_ns];
  if (rules.per_minute > 0 && recent + pods.size() > static_cast<std::size_t>(rules.per_minute)) {
    return false;
  }
  if (rules.per_namespace_per_minute <= 0) return true;
  for (const model::Allocation* a : pods) {
    if (per_ns[a->pod_ns] > static_cast<std::size_t>(rules.per_namespace_per_minute)) return false;
  }
  return true;
}

void MoveLedger::record(const ConsolidationPlan& plan, double now_s,
                        const ConsolidationRules& rules) {
  for (const PlannedMove& m : plan.moves) moves_.push_back({now_s, m.pod_ns, m.pod_uid});
  const double keep = std::max(kRateWindowS, rules.pod_cooldown_s);
  while (!moves_.empty() && now_s - moves_.front().at >= keep) moves_.pop_front();
}

}  // namespace gapless::placement
