// The dynamic mode (replay.h): pods arrive, wait in a FIFO queue and leave after their trace
// lifetime; in-process through the static replay's Placer (EnginePath), or as deployed through
// any DynamicPath. Also the dynamic sweep over traces, policies and seeds.
#include "replay.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <limits>
#include <numeric>
#include <queue>
#include <tuple>
#include <unordered_map>

#include "gapless/model/cluster.h"
#include "gapless/placement/fit.h"
#include "jobs.h"
#include "placer.h"
#include "rng.h"

namespace gapless::bench {

Arrivals make_dynamic_arrivals(const Workload& w, std::size_t node_count, std::uint64_t seed) {
  Rng rng(seed);
  std::vector<int> rank(w.pods.size());
  std::iota(rank.begin(), rank.end(), 0);
  for (std::size_t i = rank.size(); i > 1; --i) std::swap(rank[i - 1], rank[rng.below(i)]);
  Arrivals a;
  a.order.resize(w.pods.size());
  std::iota(a.order.begin(), a.order.end(), 0);
  std::sort(a.order.begin(), a.order.end(), [&](int x, int y) {
    const std::int64_t cx = w.pods[x].creation_time, cy = w.pods[y].creation_time;
    return cx != cy ? cx < cy : rank[x] < rank[y];
  });
  a.node_priority.resize(node_count);
  std::iota(a.node_priority.begin(), a.node_priority.end(), 0);
  for (std::size_t i = node_count; i > 1; --i) {
    std::swap(a.node_priority[i - 1], a.node_priority[rng.below(i)]);
  }
  return a;
}

std::vector<char> draw_movable(std::size_t arrivals, double fraction, std::uint64_t seed) {
  std::vector<char> out(arrivals, 0);
  if (fraction <= 0) return out;
  Rng rng(seed ^ 0x6d6f7661626c6521ULL);
  const auto cut = static_cast<std::uint64_t>(fraction * 1000000);
  for (char& m : out) m = rng.below(1000000) < cut ? 1 : 0;
  return out;
}

PolicySetup with_consolidation(PolicySetup policy, const DynamicOptions& options) {
  if (options.movable > 0) policy.consolidation.enabled = true;
  if (options.max_moves > 0) policy.consolidation.max_moves = options.max_moves;
  return policy;
}

namespace {

// Linear interpolation between the closest ranks (numpy's default). REQUIRES: sorted, non-empty.
double percentile(const std::vector<double>& sorted, double q) {
  const double pos = q * static_cast<double>(sorted.size() - 1);
  const std::size_t lo = static_cast<std::size_t>(pos);
  const std::size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - static_cast<double>(lo));
}

// Mean, max and share that waited at all (%) of pending times, in any order; zeros if none.
struct PendingSummary {
  double mean = 0, max = 0, waited_pct = 0;
};
PendingSummary summarize_pending(const std::vector<double>& pending) {
  PendingSummary s;
  if (pending.empty()) return s;
  double sum = 0;
  int waited = 0;
  for (double p : pending) {
    sum += p;
    waited += p > 0;
    s.max = std::max(s.max, p);
  }
  s.mean = sum / static_cast<double>(pending.size());
  s.waited_pct = 100.0 * waited / static_cast<double>(pending.size());
  return s;
}

// The in-process path: the static replay's Placer. A pod that waits is recorded as the
// extender's filter records it (kFilter): the replay sees every failure.
class EnginePath : public DynamicPath {
 public:
  EnginePath(const std::vector<model::Node>& nodes, const Workload& w, const Arrivals& a,
             const PolicySetup& policy, std::uint64_t seed, const DynamicOptions& options)
      : nodes_(nodes),
        w_(w),
        a_(a),
        placer_(nodes, w, with_consolidation(policy, options), a.node_priority, seed, false),
        movable_(draw_movable(a.order.size(), options.movable, seed)) {
    if (options.movable > 0) {
      placer_.set_movable([this](const std::string& uid) { return movable_[arrival_of(uid)]; });
    }
  }

  std::optional<Room> make_room(int pod, const std::string& uid, double t,
                                const LeavesAt& started_at) override {
    return placer_.make_room(pod, uid, t, started_at,
                             [this](const std::string& u) { return a_.order[arrival_of(u)]; });
  }

  std::size_t node_count() const override { return placer_.node_count(); }
  void arrive(int pod, const std::string& uid) override { placer_.observe(pod, uid); }
  bool may_fit(int pod, std::size_t n) const override {
    return placement::quick_fit(placer_.node(n), w_.requests[pod]).code ==
           placement::FitCode::kFits;
  }
  std::size_t start(int pod, const std::string& uid, std::int64_t* granted) override {
    return placer_.place(pod, uid, granted);
  }
  void waiting(int pod, const std::string& uid, double t) override { placer_.wait(pod, uid, t); }
  void gave_up(int, const std::string& uid) override { placer_.stop_waiting(uid); }
  void left(int, const std::string& uid, std::size_t n) override { placer_.release(uid, n); }

  // Per node that could take the pod empty: its running pods put back on the empty node, then
  // taken off in the order they leave until the pod fits. Nodes are tried soonest-empty first
  // (an upper bound on their room, so the best found falls early), and one whose first
  // departure is no sooner than the best found so far is skipped (the pod fits none now, so no
  // node has room before its first departure).
  double earliest_room(int pod, double t, const LeavesAt& leaves_at) const override {
    const model::GpuRequest& req = w_.requests[pod];
    double best = std::numeric_limits<double>::infinity();
    placer_.read([&](const model::Cluster& live) {
      using Running = std::vector<std::pair<double, const model::Allocation*>>;
      std::unordered_map<std::string, Running> on_node;
      for (const model::Allocation* a : live.allocations()) {
        // With --movable, a movable pod holding GPUs could be evicted at once: the bound is then
        // every consolidation plan's (wherever its pods would go).
        const bool evictable = movable_[arrival_of(a->pod_uid)] != 0 &&
                               (!a->gpus.empty() || !a->mig.empty()) &&
                               static_cast<int>(a->gpus.size()) < w_.pods[pod].num_gpu;
        on_node[a->node].emplace_back(evictable ? t : leaves_at(a->pod_uid), a);
      }
      std::vector<std::pair<double, const model::Node*>> candidates;  // (empties at, node)
      for (const model::Node& empty : nodes_) {
        if (placement::quick_fit(empty, req).code != placement::FitCode::kFits) continue;
        const model::Node* now = live.find_node(empty.name);
        if (now != nullptr && placement::quick_fit(*now, req).code == placement::FitCode::kFits) {
          best = t;  // held for another waiting pod, say: room already
          return;
        }
        Running& running = on_node[empty.name];
        std::sort(running.begin(), running.end(), [](const auto& x, const auto& y) {
          return x.first < y.first || (x.first == y.first && x.second->pod_uid < y.second->pod_uid);
        });
        candidates.emplace_back(running.empty() ? t : running.back().first, &empty);
      }
      std::sort(candidates.begin(), candidates.end(),
                [](const auto& x, const auto& y) { return x.first < y.first; });
      for (const auto& [empties, empty] : candidates) {
        const Running& running = on_node[empty->name];
        if (running.empty() || running.front().first >= best) continue;
        model::Cluster one;
        one.set_check_host(true);
        one.upsert_node(*empty);
        for (const auto& r : running) (void)one.commit(*r.second);
        for (const auto& [leaves, a] : running) {  // it fits once all are gone, at the latest
          one.release(a->pod_uid);
          if (placement::quick_fit(*one.find_node(empty->name), req).code ==
              placement::FitCode::kFits) {
            best = std::min(best, std::max(t, leaves));
            break;
          }
        }
      }
    });
    return best;
  }

 private:
  static std::size_t arrival_of(const std::string& uid) { return std::stoul(uid.substr(4)); }

  const std::vector<model::Node>& nodes_;
  const Workload& w_;
  const Arrivals& a_;
  Placer placer_;
  std::vector<char> movable_;  // per arrival
};

}  // namespace

DynamicRun replay_dynamic(const std::vector<model::Node>& nodes, const Workload& w,
                          const Arrivals& a, const PolicySetup& policy, std::uint64_t seed,
                          const DynamicOptions& options) {
  EnginePath path(nodes, w, a, policy, seed, options);
  return replay_dynamic(nodes, w, a, path, options);
}

DynamicRun replay_dynamic(const std::vector<model::Node>& nodes, const Workload& w,
                          const Arrivals& a, DynamicPath& path, const DynamicOptions& options) {
  const auto wall = std::chrono::steady_clock::now();
  const std::size_t count = path.node_count();
  const double capacity = static_cast<double>(gpu_capacity_milli(nodes));
  const std::size_t arrivals = a.order.size();

  DynamicRun out;
  out.arrived = static_cast<int>(arrivals);
  out.arrival.resize(arrivals);
  out.start.assign(arrivals, -1.0);
  for (std::size_t k = 0; k < arrivals; ++k) {
    out.arrival[k] = static_cast<double>(w.pods[a.order[k]].creation_time) / options.speedup;
  }
  out.horizon = arrivals == 0 ? 0 : out.arrival.back();
  const double horizon = out.horizon;
  const int points = std::max(2, options.curve_points);
  out.alloc_curve.assign(points, 0);
  out.waiting_curve.assign(points, 0);

  std::vector<std::size_t> node_of(arrivals, count);
  std::vector<std::int64_t> granted_of(arrivals, 0);
  // Departures: (time, arrival index, run), earliest first; equal times leave in arrival order.
  // A pod moved by consolidation starts a new run: its earlier departure is stale.
  using Departure = std::tuple<double, std::size_t, int>;
  std::vector<int> run_of(arrivals, 0);
  std::vector<double> run_start(arrivals, 0);
  std::priority_queue<Departure, std::vector<Departure>, std::greater<>> departures;
  std::vector<std::size_t> waiting;  // arrival indices, FIFO
  std::vector<std::size_t> freed;    // nodes that gained room since the last retry
  std::vector<char> is_freed(count, 0);
  std::vector<std::uint64_t> blocked(w.classes, 0);  // == pass: that class fits no freed node
  std::uint64_t pass = 0;

  std::int64_t used = 0;
  double last = 0, area = 0, contended_area = 0;
  int sample = 0;
  // The state (used, waiting) held over [last, t).
  auto advance = [&](double t) {
    while (sample < points) {
      const double at = options.curve_span * horizon * sample / (points - 1);
      if (at >= t) break;
      out.alloc_curve[sample] = 100.0 * static_cast<double>(used) / capacity;
      out.waiting_curve[sample] = static_cast<double>(waiting.size());
      ++sample;
    }
    const double lo = std::min(last, horizon), hi = std::min(t, horizon);
    if (hi > lo) area += static_cast<double>(used) * (hi - lo);
    if (!waiting.empty() && t > last) {
      out.contended_s += t - last;
      contended_area += static_cast<double>(used) * (t - last);
    }
    last = t;
  };
  std::vector<double> leaves(arrivals, std::numeric_limits<double>::infinity());
  // Multi-GPU pods that waited: earliest_room - arrival (NaN unless options.least_waits).
  std::vector<double> bound(arrivals,
                            options.least_waits ? 0.0 : std::numeric_limits<double>::quiet_NaN());
  auto start_pod = [&](std::size_t k, double t) {
    const int pod = a.order[k];
    std::int64_t granted = 0;
    const std::size_t n = path.start(pod, "pod-" + std::to_string(k), &granted);
    if (n == count) return false;
    used += granted;
    if (t <= horizon) out.alloc_peak = std::max(out.alloc_peak, 100.0 * used / capacity);
    out.start[k] = t;
    node_of[k] = n;
    granted_of[k] = granted;
    const TracePod& p = w.pods[pod];
    leaves[k] = t + static_cast<double>(p.deletion_time - p.creation_time);
    run_start[k] = t;
    departures.push({leaves[k], k, run_of[k]});
    return true;
  };
  // Consolidation for a multi-GPU pod that fits no node at t: the moved pods restart (their run
  // so far is GPU-time lost), the pod starts on the room made.
  const DynamicPath::LeavesAt started_at = [&](const std::string& uid) {
    return run_start[std::stoul(uid.substr(4))];
  };
  std::vector<std::size_t> requeued;  // moved pods that did not start again
  auto make_room = [&](std::size_t k, double t) {
    const int pod = a.order[k];
    if (options.movable <= 0 || w.pods[pod].num_gpu < 2) return false;
    auto room = path.make_room(pod, "pod-" + std::to_string(k), t, started_at);
    if (!room) return false;
    ++out.plans_applied;
    for (const DynamicPath::Moved& m : room->moved) {
      const std::size_t j = std::stoul(m.uid.substr(4));
      ++out.moves;
      out.gpu_seconds_lost += static_cast<double>(granted_of[j]) / 1000.0 * (t - run_start[j]);
      used -= granted_of[j];
      ++run_of[j];
      granted_of[j] = m.granted;
      node_of[j] = m.node;
      if (m.node == count) {
        ++out.moved_unplaced;
        requeued.push_back(j);
        continue;
      }
      used += m.granted;
      const TracePod& p = w.pods[a.order[j]];
      run_start[j] = t;
      leaves[j] = t + static_cast<double>(p.deletion_time - p.creation_time);
      departures.push({leaves[j], j, run_of[j]});
    }
    if (room->node == count) return false;
    used += room->granted;
    if (t <= horizon) out.alloc_peak = std::max(out.alloc_peak, 100.0 * used / capacity);
    out.start[k] = t;
    node_of[k] = room->node;
    granted_of[k] = room->granted;
    const TracePod& p = w.pods[pod];
    run_start[k] = t;
    leaves[k] = t + static_cast<double>(p.deletion_time - p.creation_time);
    departures.push({leaves[k], k, run_of[k]});
    return true;
  };
  const DynamicPath::LeavesAt leaves_at = [&](const std::string& uid) {
    return leaves[std::stoul(uid.substr(4))];  // "pod-K"
  };
  auto retry = [&](double t) {
    ++pass;
    std::size_t keep = 0;
    for (std::size_t i = 0; i < waiting.size(); ++i) {
      const std::size_t k = waiting[i];
      if (options.max_wait > 0 && t - out.arrival[k] > options.max_wait) {
        path.gave_up(a.order[k], "pod-" + std::to_string(k));
        continue;
      }
      const int pod = a.order[k];
      const int cls = w.request_class[pod];
      bool fits = false;
      if (blocked[cls] != pass) {
        for (std::size_t n : freed) {
          if (path.may_fit(pod, n)) {
            fits = true;
            break;
          }
        }
      }
      if (fits && start_pod(k, t)) continue;
      if (make_room(k, t)) continue;
      blocked[cls] = pass;  // placements only take room: the rest of the class cannot fit either
      // Still waiting after a departure, as kube-scheduler finds it when a pod deletion
      // requeues it: from the second time it may hold a drain target.
      path.waiting(pod, "pod-" + std::to_string(k), t);
      waiting[keep++] = k;
    }
    waiting.resize(keep);
    for (std::size_t n : freed) is_freed[n] = 0;
    freed.clear();
  };

  std::size_t next = 0;
  while (next < arrivals || !departures.empty()) {
    const double arrive =
        next < arrivals ? out.arrival[next] : std::numeric_limits<double>::infinity();
    if (!departures.empty() && std::get<0>(departures.top()) <= arrive) {
      const double t = std::get<0>(departures.top());
      advance(t);
      while (!departures.empty() && std::get<0>(departures.top()) == t) {
        const auto [at, k, run] = departures.top();
        departures.pop();
        if (run != run_of[k]) continue;  // moved since: that run ended early
        path.left(a.order[k], "pod-" + std::to_string(k), node_of[k]);
        used -= granted_of[k];
        if (!is_freed[node_of[k]]) {
          is_freed[node_of[k]] = 1;
          freed.push_back(node_of[k]);
        }
      }
      retry(t);
      waiting.insert(waiting.end(), requeued.begin(), requeued.end());
      requeued.clear();
    } else {
      advance(arrive);
      path.arrive(a.order[next], "pod-" + std::to_string(next));
      if (!start_pod(next, arrive) && !make_room(next, arrive)) {
        const int pod = a.order[next];
        if (options.least_waits && w.pods[pod].num_gpu >= 2) {
          bound[next] = path.earliest_room(pod, arrive, leaves_at) - arrive;
        }
        waiting.push_back(next);
        path.waiting(a.order[next], "pod-" + std::to_string(next), arrive);
      }
      waiting.insert(waiting.end(), requeued.begin(), requeued.end());
      requeued.clear();
      ++next;
    }
  }
  for (; sample < points; ++sample) {  // the final state (the queue holds the pods never placed)
    out.alloc_curve[sample] = 100.0 * static_cast<double>(used) / capacity;
    out.waiting_curve[sample] = static_cast<double>(waiting.size());
  }
  out.alloc_mean = horizon > 0 ? 100.0 * area / (horizon * capacity) : out.alloc_peak;
  out.alloc_contended = out.contended_s > 0 ? 100.0 * contended_area / (out.contended_s * capacity)
                                            : std::numeric_limits<double>::quiet_NaN();

  std::vector<double> pending, multi_gpu;
  double longest = 0;
  out.multi_gpu_longest_bound =
      options.least_waits ? 0.0 : std::numeric_limits<double>::quiet_NaN();
  for (std::size_t k = 0; k < arrivals; ++k) {
    if (out.start[k] < 0) continue;
    pending.push_back(out.start[k] - out.arrival[k]);
    if (w.pods[a.order[k]].num_gpu < 2) continue;
    multi_gpu.push_back(pending.back());
    if (pending.back() > longest) {
      longest = pending.back();
      out.multi_gpu_longest_bound = bound[k];
    }
  }
  const PendingSummary multi = summarize_pending(multi_gpu);
  out.multi_gpu_started = static_cast<int>(multi_gpu.size());
  out.multi_gpu_pending_mean = multi.mean;
  if (!multi_gpu.empty()) {
    std::sort(multi_gpu.begin(), multi_gpu.end());
    out.multi_gpu_pending_p99 = percentile(multi_gpu, 0.99);
  }
  out.moves_per_1000 = arrivals == 0 ? 0 : 1000.0 * out.moves / static_cast<double>(arrivals);
  out.multi_gpu_pending_max = multi.max;
  out.multi_gpu_waited_pct = multi.waited_pct;
  out.started = static_cast<int>(pending.size());
  out.never_placed = out.arrived - out.started;
  if (!pending.empty()) {
    std::sort(pending.begin(), pending.end());  // for the percentiles
    const PendingSummary all = summarize_pending(pending);
    out.pending_mean = all.mean;
    out.pending_max = all.max;
    out.waited_pct = all.waited_pct;
    out.pending_p50 = percentile(pending, 0.50);
    out.pending_p99 = percentile(pending, 0.99);
  }
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall).count();
  return out;
}

std::vector<DynamicCell> run_dynamic_sweep(
    const std::vector<model::Node>& nodes, const std::vector<Workload>& workloads,
    const std::vector<PolicySetup>& policies, const std::vector<int>& seeds,
    const DynamicOptions& options, unsigned threads,
    const std::function<void(int, int, const std::string&)>& progress,
    const DynamicRunner& runner) {
  const std::size_t W = workloads.size(), P = policies.size(), S = seeds.size();
  std::vector<Arrivals> arrivals(W * S);
  for (std::size_t w = 0; w < W; ++w) {
    for (std::size_t s = 0; s < S; ++s) {
      arrivals[w * S + s] =
          make_dynamic_arrivals(workloads[w], nodes.size(), static_cast<std::uint64_t>(seeds[s]));
    }
  }
  std::vector<DynamicCell> cells(W * P);
  for (std::size_t w = 0; w < W; ++w) {
    for (std::size_t p = 0; p < P; ++p) {
      DynamicCell& c = cells[w * P + p];
      c.trace = workloads[w].name;
      c.policy = policies[p].label;
      c.seeds = seeds;
      c.runs.resize(S);
    }
  }
  run_jobs(
      static_cast<int>(W * P * S), threads,
      [&](int job) {
        const std::size_t s = job % S, p = job / S % P, w = job / S / P;
        DynamicCell& c = cells[w * P + p];
        const auto seed = static_cast<std::uint64_t>(seeds[s]);
        c.runs[s] =
            runner ? runner(nodes, workloads[w], arrivals[w * S + s], policies[p], seed, options)
                   : replay_dynamic(nodes, workloads[w], arrivals[w * S + s], policies[p], seed,
                                    options);
        return c.trace + " x " + c.policy + " x seed " + std::to_string(seeds[s]);
      },
      progress);
  return cells;
}

}  // namespace gapless::bench
