#include "placer.h"

#include <optional>

namespace gapless::bench {
namespace {

bool uses_draw(const placement::Profile& p) {
  for (const auto* level : {&p.node, &p.gpu}) {
    for (const placement::WeightedStrategy& ws : *level) {
      if (ws.strategy->uses_draw()) return true;
    }
  }
  return false;
}

}  // namespace

Placer::Placer(const std::vector<model::Node>& nodes, const Workload& w, const PolicySetup& policy,
               const std::vector<int>& node_priority, std::uint64_t seed, bool track_oracle)
    : w_(w),
      priority_(node_priority),
      track_oracle_(track_oracle),
      oracle_(w.oracle),
      sched_(cluster_of(nodes), policy_of(policy), options_of(w, policy)),
      loaded_(sched_.policy()),
      profile_(loaded_->policy.profiles.front()),
      redraw_(uses_draw(profile_)),
      draws_(seed ^ 0x5eed5eed5eed5eedULL) {
  sched_.read([&](const model::Cluster& c) { ptrs_ = c.nodes(); });
  for (const model::Node* n : ptrs_) {
    index_of_.emplace(n->name, names_.size());
    names_.push_back(n->name);
  }
  if (track_oracle_) oracle_.rebuild(ptrs_);
}

std::size_t Placer::place(int pod, const std::string& uid, std::int64_t* granted) {
  const model::GpuRequest& req = w_.requests[pod];
  const std::size_t count = ptrs_.size();
  const std::uint64_t draw = draws_.next();
  const std::vector<double> scores =
      sched_.score(*loaded_, info(pod, uid), req, profile_, names_, draw);
  std::size_t best = count;
  for (std::size_t n = 0; n < count; ++n) {
    const double s = scores[n];
    if (s < 0) continue;
    if (best == count || s > scores[best] ||
        (s == scores[best] && priority_[n] < priority_[best])) {
      best = n;
    }
  }
  if (best == count) return count;
  // The GPUs are chosen under the same draw as the node (random's share goes to a drawn GPU);
  // with the profile's draw of 0 every share on a node would take the same GPU first.
  std::optional<placement::Profile> drawn;
  if (redraw_) {
    drawn = profile_;
    drawn->context.draw = draw;
  }
  auto alloc = sched_.reserve(info(pod, uid), req, drawn ? *drawn : profile_, names_[best]);
  if (!alloc) return count;
  *granted = granted_milli(*alloc);
  changed(best);
  return best;
}

std::optional<DynamicPath::Room> Placer::make_room(
    int pod, const std::string& uid, double t,
    const std::function<double(const std::string&)>& started_at,
    const std::function<int(const std::string&)>& pod_of) {
  const placement::Scheduler::RequestOf request_of = [&](const model::Allocation& a) {
    return std::optional(w_.requests[pod_of(a.pod_uid)]);
  };
  const placement::Scheduler::StartedAt started = [&](const model::Allocation& a) {
    return started_at(a.pod_uid);
  };
  const placement::ConsolidationSearch search =
      sched_.consolidate(info(pod, uid), w_.requests[pod], profile_, t, request_of, started);
  if (!search.plan || loaded_->policy.consolidation.dry_run) return std::nullopt;
  const placement::ConsolidationPlan& plan = *search.plan;
  for (const placement::PlannedMove& m : plan.moves) release(m.pod_uid, index_of_.at(m.from));
  DynamicPath::Room room;
  room.node = node_count();
  if (auto a = sched_.reserve(info(pod, uid), w_.requests[pod], profile_, plan.node)) {
    room.node = index_of_.at(plan.node);
    room.granted = granted_milli(*a);
    changed(room.node);
  }
  for (const placement::PlannedMove& m : plan.moves) {
    const int moved = pod_of(m.pod_uid);
    DynamicPath::Moved out{m.pod_uid, node_count(), 0};
    if (auto a = sched_.reserve(info(moved, m.pod_uid), w_.requests[moved], profile_, m.to)) {
      out.node = index_of_.at(m.to);
      out.granted = granted_milli(*a);
      changed(out.node);
    } else {
      out.node = place(moved, m.pod_uid, &out.granted);
    }
    room.moved.push_back(std::move(out));
  }
  sched_.moves_made(plan, t);
  return room;
}

model::Cluster Placer::cluster_of(const std::vector<model::Node>& nodes) {
  model::Cluster c;
  for (const model::Node& n : nodes) c.upsert_node(n);
  return c;
}

placement::SchedulerOptions Placer::options_of(const Workload& w, const PolicySetup& policy) {
  placement::SchedulerOptions o;
  o.check_host = true;  // nothing else filters CPU and memory in the paper's replay
  o.fixed_mix = policy.oracle_mix ? &w.oracle : nullptr;
  o.cache_shapes = static_cast<std::size_t>(w.classes) + 1;  // every request class stays cached
  return o;
}

}  // namespace gapless::bench
