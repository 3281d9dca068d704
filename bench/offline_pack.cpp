// The offline packing (offline_pack.h).
#include "offline_pack.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <numeric>
#include <optional>

#include "gapless/model/cluster.h"
#include "gapless/placement/fit.h"
#include "gapless/placement/strategy.h"
#include "lp_plan.h"
#include "offline_repair.h"
#include "placer.h"
#include "trace.h"

namespace gapless::bench {
namespace {

// LPs solved again on what is left after the first plan (each about as fast as the first).
constexpr int kResidualRounds = 3;

// Larger GPU asks first; among equals, the pickier (fewer allowed models) and the larger CPU ask.
std::vector<int> packing_order(const Workload& w, std::vector<int> pods) {
  auto key = [&](int pod) {
    const model::GpuRequest& r = w.requests[pod];
    const std::int64_t milli = r.kind == model::RequestKind::kWhole    ? 1000LL * r.whole
                               : r.kind == model::RequestKind::kShared ? r.shared.compute_milli
                                                                       : -1;
    const std::size_t freedom =
        r.models.empty() ? std::numeric_limits<std::size_t>::max() : r.models.size();
    return std::make_tuple(-milli, freedom, -r.host.cpu_milli, -r.host.memory_mib, pod);
  };
  std::sort(pods.begin(), pods.end(), [&](int a, int b) { return key(a) < key(b); });
  return pods;
}

int idle_gpus(const model::Node& n) {
  int idle = 0;
  for (const model::Gpu& g : n.gpus) idle += g.used.idle() ? 1 : 0;
  return idle;
}

model::GpuGrant grant(const model::Node& n, int gpu, const model::GpuRequest& r) {
  const int share = r.kind == model::RequestKind::kShared ? r.shared.compute_milli : 0;
  return {gpu, n.gpus[gpu].uuid, 0, share, 0};
}

// The GPUs the pod would get on a node it fits, and how much room the pick leaves (lower is a
// tighter fit): whole GPUs, the lowest idle ones; a share, the GPU with the least compute left
// that still takes it, ties to the node with fewer idle GPUs.
struct Pick {
  std::vector<int> gpus;
  std::int64_t room_left = 0;
};

std::optional<Pick> pick_gpus(const model::Node& n, const model::GpuRequest& r) {
  Pick p;
  if (r.kind == model::RequestKind::kWhole) {
    for (const model::Gpu& g : n.gpus)
      if (g.used.idle() && static_cast<int>(p.gpus.size()) < r.whole) p.gpus.push_back(g.index);
    if (static_cast<int>(p.gpus.size()) < r.whole) return std::nullopt;
    p.room_left = idle_gpus(n) - r.whole;
    return p;
  }
  if (r.kind != model::RequestKind::kShared) return p;  // host resources only
  const model::Gpu* best = nullptr;
  for (const model::Gpu& g : n.gpus) {
    if (g.used.whole || g.compute_free_milli() < r.shared.compute_milli) continue;
    if (best == nullptr || g.compute_free_milli() < best->compute_free_milli()) best = &g;
  }
  if (best == nullptr) return std::nullopt;
  p.gpus.push_back(best->index);
  p.room_left = (best->compute_free_milli() - r.shared.compute_milli) * 1000LL + idle_gpus(n);
  return p;
}

model::Allocation allocation(const model::Node& n, const std::vector<int>& gpus,
                             const model::GpuRequest& r, const std::string& uid) {
  model::Allocation a;
  a.pod_uid = uid;
  a.pod_name = uid;
  a.node = n.name;
  for (int g : gpus) a.gpus.push_back(grant(n, g, r));
  a.host = r.host;
  return a;
}

// The best-fit node for the pod and its allocation, or nullopt when no node fits.
std::optional<model::Allocation> best_fit(const std::vector<const model::Node*>& nodes,
                                          const model::GpuRequest& r, const std::string& uid) {
  std::optional<Pick> best;
  const model::Node* where = nullptr;
  for (const model::Node* n : nodes) {
    if (placement::quick_fit(*n, r).code != placement::FitCode::kFits) continue;
    std::optional<Pick> p = pick_gpus(*n, r);
    if (!p || (best && p->room_left >= best->room_left)) continue;
    best = std::move(p);
    where = n;
    if (r.kind == model::RequestKind::kNone) break;  // host resources only: first fit
  }
  if (!best) return std::nullopt;
  return allocation(*where, best->gpus, r, uid);
}

// Checks the finished placement: every allocation on a node of a model its pod allows, and the
// GPU milli the nodes show held equal to the allocations' sum.
std::string check(const model::Cluster& c, const Workload& w, const std::vector<int>& uid_pod,
                  std::int64_t allocated) {
  std::int64_t held = 0;
  for (const model::Node* n : c.nodes()) {
    for (const model::Gpu& g : n->gpus)
      held += g.used.whole ? model::kFullComputeMilli : g.used.compute_used_milli;
  }
  if (held != allocated) return "offline packing: nodes hold " + std::to_string(held) + " milli";
  for (const model::Allocation* a : c.allocations()) {
    const model::GpuRequest& r = w.requests[uid_pod[std::stoul(a->pod_uid)]];
    const model::Node* n = c.find_node(a->node);
    if (r.models.empty() || a->gpus.empty()) continue;
    const std::string& m = n->gpus[a->gpus.front().index].model;
    if (std::find(r.models.begin(), r.models.end(), m) == r.models.end())
      return "offline packing: pod " + a->pod_uid + " on a model it does not allow";
  }
  return "";
}

// The allocations of `c` as a Packing of in.pods; pod_of(uid) names each allocation's pod.
Packing packing_of(const model::Cluster& c, const std::vector<model::Node>& nodes,
                   const LimitInstance& in, const std::function<int(const std::string&)>& pod_of) {
  std::map<std::string, int> index;
  for (std::size_t n = 0; n < nodes.size(); ++n) index[nodes[n].name] = static_cast<int>(n);
  std::map<int, std::vector<std::size_t>> free_slots;  // pod -> its slots not yet filled
  for (std::size_t i = in.pods.size(); i-- > 0;) free_slots[in.pods[i]].push_back(i);
  Packing p{std::vector<int>(in.pods.size(), -1), std::vector<std::vector<int>>(in.pods.size())};
  for (const model::Allocation* a : c.allocations()) {
    auto slots = free_slots.find(pod_of(a->pod_uid));
    if (slots == free_slots.end() || slots->second.empty()) continue;
    const std::size_t slot = slots->second.back();
    slots->second.pop_back();
    p.node[slot] = index.at(a->node);
    for (const model::GpuGrant& g : a->gpus) p.gpus[slot].push_back(g.index);
  }
  return p;
}

// Commits pods one at a time, each only where the engine's filter passes it.
class Packer {
 public:
  Packer(const std::vector<model::Node>& nodes, const Workload& w) : w_(w) {
    for (const model::Node& n : nodes) cluster_.upsert_node(n);
    view_ = cluster_.nodes();
  }
  // The pod on this node and these GPUs; false (and out.error) if the engine refuses it.
  bool commit_planned(const PlannedPod& p, const std::string& node) {
    const model::Node* n = cluster_.find_node(node);
    const model::GpuRequest& r = w_.requests[p.pod];
    if (n == nullptr || placement::quick_fit(*n, r).code != placement::FitCode::kFits) return false;
    return commit(p.pod, allocation(*n, p.gpus, r, next_uid()));
  }
  void best_fit_or_drop(int pod) {
    auto a = best_fit(view_, w_.requests[pod], next_uid());
    if (!a || !commit(pod, *a)) ++out.dropped;
  }
  // What is left to place on: per node with idle GPUs and CPU left, a fresh node of those GPUs
  // (renumbered from 0) and that CPU and memory; `gpu_of[i]` maps the renumbered GPUs back.
  struct Residual {
    std::vector<model::Node> nodes;
    std::vector<std::vector<int>> gpu_of;
  };
  Residual residual() const {
    Residual r;
    for (const model::Node* n : view_) {
      std::vector<int> idle;
      for (const model::Gpu& g : n->gpus)
        if (g.used.idle()) idle.push_back(g.index);
      const model::HostResources left{n->host.cpu_milli - n->host_used.cpu_milli,
                                      n->host.memory_mib - n->host_used.memory_mib};
      if (idle.empty() || left.cpu_milli <= 0 || left.memory_mib <= 0) continue;
      r.nodes.push_back(to_node({n->name, left.cpu_milli, left.memory_mib,
                                 static_cast<int>(idle.size()), n->gpus.front().model}));
      r.gpu_of.push_back(std::move(idle));
    }
    return r;
  }
  // How many arrivals of the pod are placed (the tuned arrivals may repeat a pod).
  int placed(int pod) const {
    auto it = placed_.find(pod);
    return it == placed_.end() ? 0 : it->second;
  }
  // Where each arrived pod of `in` is (slots of in.pods; a pod arriving twice fills two).
  Packing packing(const std::vector<model::Node>& nodes, const LimitInstance& in) const {
    return packing_of(cluster_, nodes, in,
                      [&](const std::string& uid) { return uid_pod_[std::stoul(uid)]; });
  }
  OfflinePacking finish() {
    if (out.error.empty()) out.error = check(cluster_, w_, uid_pod_, out.allocated_milli);
    if (!out.error.empty()) out.allocated_milli = 0;
    return out;
  }
  OfflinePacking out;

 private:
  std::string next_uid() const { return std::to_string(uid_pod_.size()); }
  bool commit(int pod, const model::Allocation& a) {
    if (Status s = cluster_.commit(a); !s) {
      out.error = "offline packing: " + s.error();
      return false;
    }
    uid_pod_.push_back(pod);
    ++placed_[pod];
    out.allocated_milli += granted_milli(a);
    ++out.placed;
    return true;
  }
  const Workload& w_;
  model::Cluster cluster_;
  std::vector<const model::Node*> view_;
  std::vector<int> uid_pod_;  // uid (its index) -> pod
  std::map<int, int> placed_;
};

// The LP's chosen pods (its counts per shape rounded down) first, in arrival order, then the
// others in arrival order.
std::vector<int> lp_first(const LimitInstance& in, const LpBound& lp) {
  const std::size_t T = in.types.size();
  std::vector<int> quota(in.shapes.size(), 0);
  for (std::size_t s = 0; s < in.shapes.size() && lp.placed.size() == in.shapes.size() * T; ++s) {
    double sum = 0;
    for (std::size_t t = 0; t < T; ++t) sum += lp.placed[s * T + t];
    quota[s] = static_cast<int>(std::floor(sum + 1e-6));
  }
  std::vector<int> first, later;
  for (std::size_t i = 0; i < in.pods.size(); ++i) {
    const int s = in.pod_shape[i];
    if (s >= 0 && quota[s] > 0) {
      --quota[s];
      first.push_back(in.pods[i]);
    } else {
      later.push_back(in.pods[i]);
    }
  }
  first.insert(first.end(), later.begin(), later.end());
  return first;
}

// The engine's own online placement (the gapless strategy, scoring against the trace's typical
// pods) with the pods submitted in lp_first order.
Packing engine_lp_first(const std::vector<model::Node>& nodes, const Workload& w,
                        const LimitInstance& in, const LpBound& lp) {
  PolicySetup setup;
  setup.label = setup.profile.name = "gapless";
  const placement::Strategy* gapless = placement::find_strategy("gapless");
  setup.profile.node = {{gapless, 1.0}};
  setup.profile.gpu = {{gapless, 1.0}};
  setup.profile.gpu_weight = 0;
  setup.profile.topology_weight = 0;
  setup.oracle_mix = true;
  std::vector<int> priority(nodes.size());
  std::iota(priority.begin(), priority.end(), 0);
  Placer placer(nodes, w, setup, priority, 1, /*track_oracle=*/false);
  const std::vector<int> order = lp_first(in, lp);
  for (std::size_t i = 0; i < order.size(); ++i) {
    const std::string uid = std::to_string(i);
    placer.observe(order[i], uid);
    std::int64_t granted = 0;
    placer.place(order[i], uid, &granted);
  }
  Packing p;
  placer.read([&](const model::Cluster& c) {
    p = packing_of(c, nodes, in, [&](const std::string& uid) { return order[std::stoul(uid)]; });
  });
  return p;
}

// The packing committed pod by pod to a fresh model::Cluster through the engine's filter, then
// checked (offline_pack.h): the one place any packing becomes a result.
OfflinePacking commit_packing(const std::vector<model::Node>& nodes, const Workload& w,
                              const LimitInstance& in, const Packing& p, std::string method) {
  Packer packer(nodes, w);
  for (std::size_t i = 0; i < p.node.size() && i < in.pods.size(); ++i) {
    if (p.node[i] < 0) continue;
    if (!packer.commit_planned({in.pods[i], static_cast<std::size_t>(p.node[i]), p.gpus[i]},
                               nodes[p.node[i]].name) &&
        packer.out.error.empty())
      packer.out.error = "offline packing: pod " + std::to_string(in.pods[i]) + " refused";
  }
  OfflinePacking out = packer.finish();
  out.method = std::move(method);
  return out;
}

// Commits the plan the LP's optimum for `in` suggests; pods the engine refuses stay out.
void commit_plan(Packer& packer, const std::vector<model::Node>& nodes, const Workload& w,
                 const LimitInstance& in, const LpBound& lp,
                 const std::vector<std::vector<int>>* gpu_of = nullptr) {
  for (PlannedPod p : plan_from_lp(nodes, w, in, lp)) {
    if (gpu_of != nullptr)
      for (int& g : p.gpus) g = (*gpu_of)[p.node][g];
    packer.commit_planned(p, nodes[p.node].name);
  }
}

// The arrivals among `pods` not placed: as many of each pod as were not.
std::vector<int> not_placed(const Packer& packer, const std::vector<int>& pods) {
  std::map<int, int> placed;
  std::vector<int> left;
  for (int pod : pods) {
    auto [it, added] = placed.emplace(pod, 0);
    if (added) it->second = packer.placed(pod);
    if (it->second > 0) {
      --it->second;
    } else {
      left.push_back(pod);
    }
  }
  return left;
}

// The plan from the LP's optimum; then, a few times, the same for the pods left out on the
// idle GPUs left (an LP of its own: rounding loses less of a smaller problem); then best fit
// decreasing for every pod still out.
Packing plan_then_fill(const std::vector<model::Node>& nodes, const Workload& w,
                       const LimitInstance& in, const LpBound& lp) {
  Packer packer(nodes, w);
  commit_plan(packer, nodes, w, in, lp);
  std::vector<int> left = not_placed(packer, in.pods);
  for (int round = 0; round < kResidualRounds && !left.empty(); ++round) {
    const Packer::Residual r = packer.residual();
    const LimitInstance again = make_limit_instance(r.nodes, w, left);
    commit_plan(packer, r.nodes, w, again, solve_lp_bound(again), &r.gpu_of);
    const std::size_t before = left.size();
    left = not_placed(packer, in.pods);
    if (left.size() == before) break;
  }
  for (int pod : packing_order(w, left)) packer.best_fit_or_drop(pod);
  return packer.packing(nodes, in);
}

}  // namespace

OfflinePacking offline_pack(const std::vector<model::Node>& nodes, const Workload& w,
                            const LimitInstance& in, const LpBound& lp) {
  const std::pair<const char*, Packing> starts[] = {
      {"lp-plan", plan_then_fill(nodes, w, in, lp)},
      {"engine-lp-first", engine_lp_first(nodes, w, in, lp)}};
  std::optional<OfflinePacking> best, failed;
  for (const auto& [method, start] : starts) {
    // The repaired packing, and the start itself should the repair's fail its checks.
    for (const Packing& p : {repair_packing(nodes, w, in, start), start}) {
      OfflinePacking o = commit_packing(nodes, w, in, p, method);
      const bool checked = o.error.empty();
      if (!checked && !failed) failed = std::move(o);
      if (checked && (!best || o.allocated_milli > best->allocated_milli)) best = std::move(o);
      if (checked) break;
    }
  }
  return best ? *best : *failed;
}

}  // namespace gapless::bench
