// The offline packing's repair (offline_repair.h).
#include "offline_repair.h"

#include <algorithm>
#include <optional>
#include <tuple>

namespace gapless::bench {
namespace {

constexpr int kFull = 1000;  // milli of one GPU
// Ejection levels below the pod being placed, and the places tried at each level (by the
// levels left): two levels let a pod take a node's last CPU from a pod that then swaps with a
// lighter one elsewhere.
constexpr int kDepth = 2;
constexpr int kTried[kDepth + 1] = {0, 4, 8};
constexpr int kMaxPasses = 30;

std::int64_t value_of(const model::GpuRequest& r) {
  if (r.kind == model::RequestKind::kWhole) return 1000LL * r.whole;
  if (r.kind == model::RequestKind::kShared) return r.shared.compute_milli;
  return 0;
}

// A place for a pod: a node, the GPU a share goes to (-1 for whole GPUs), and the pods that
// must leave first, with the GPU milli they hold.
struct Spot {
  int node = -1;
  int gpu = -1;
  std::vector<std::size_t> victims;
  std::int64_t cost = 0;
};

class Search {
 public:
  Search(const std::vector<model::Node>& nodes, const Workload& w, const LimitInstance& in,
         const Packing& start)
      : w_(w), in_(in), at_(in.pods.size(), -1), gpus_(in.pods.size()), locked_(in.pods.size(), 0) {
    for (int pod : in.pods) value_.push_back(value_of(w.requests[pod]));
    for (std::size_t n = 0; n < nodes.size(); ++n) {
      State s;
      s.cpu = nodes[n].host.cpu_milli;
      s.memory = nodes[n].host.memory_mib;
      s.gpus.resize(nodes[n].gpus.size());
      s.idle = static_cast<int>(s.gpus.size());
      nodes_.push_back(std::move(s));
    }
    of_type_.resize(in.types.size());
    for (std::size_t n = 0; n < nodes.size() && n < in.node_type.size(); ++n) {
      if (in.node_type[n] >= 0) of_type_[in.node_type[n]].push_back(static_cast<int>(n));
      if (in.node_type[n] < 0) gpuless_.push_back(static_cast<int>(n));
    }
    for (std::size_t i = 0; i < in.pods.size() && i < start.node.size(); ++i)
      if (start.node[i] >= 0 && (in.pod_shape[i] >= 0 || host_only(i)))
        raw_put(i, start.node[i], start.gpus[i]);
  }

  void run(RepairStats* stats) {
    for (int pass = 0; pass < kMaxPasses; ++pass) {
      if (stats != nullptr) ++stats->passes;
      std::vector<char> failed(in_.shapes.size(), 0);
      bool improved = false;
      for (std::size_t u : left_out()) {
        const int shape = in_.pod_shape[u];
        if (at_[u] >= 0 || failed[shape]) continue;
        if (try_place(u, kDepth) > 0) {
          improved = true;
          if (stats != nullptr) ++stats->placed;
        } else {
          failed[shape] = 1;  // no use trying its twins again before something else moves
        }
      }
      if (!improved) break;
    }
    // Pods without GPUs add no GPU milli: the chains move them out of the way for nothing; put
    // back where they fit, the most CPU first, so the packing holds as many of them as it can.
    std::vector<std::size_t> cpu_only;
    for (std::size_t i = 0; i < at_.size(); ++i)
      if (at_[i] < 0 && host_only(i)) cpu_only.push_back(i);
    auto key = [&](std::size_t i) {
      return std::make_tuple(-req(i).host.cpu_milli, -req(i).host.memory_mib, i);
    };
    std::sort(cpu_only.begin(), cpu_only.end(), [&](auto a, auto b) { return key(a) < key(b); });
    for (std::size_t i : cpu_only) insert(i);
  }

  Packing result() const { return {at_, gpus_}; }

 private:
  struct Gpu {
    int used = 0;  // milli; kFull when held whole
    bool whole = false;
    std::vector<std::size_t> slots;
  };
  struct State {
    std::int64_t cpu = 0, memory = 0;  // left
    std::vector<Gpu> gpus;
    std::vector<std::size_t> slots;
    int idle = 0;
  };
  struct Undo {
    std::size_t slot;
    int node;  // where it was; -1: out
    std::vector<int> gpus;
  };

  const model::GpuRequest& req(std::size_t slot) const { return w_.requests[in_.pods[slot]]; }
  bool host_only(std::size_t slot) const { return req(slot).kind == model::RequestKind::kNone; }
  std::int64_t value(std::size_t slot) const { return value_[slot]; }

  // The slots of GPU pods left out, the most GPU milli first, then the most CPU.
  std::vector<std::size_t> left_out() const {
    std::vector<std::size_t> out;
    for (std::size_t i = 0; i < at_.size(); ++i)
      if (at_[i] < 0 && in_.pod_shape[i] >= 0) out.push_back(i);
    auto key = [&](std::size_t i) {
      return std::make_tuple(-value(i), -req(i).host.cpu_milli, -req(i).host.memory_mib, i);
    };
    std::sort(out.begin(), out.end(), [&](auto a, auto b) { return key(a) < key(b); });
    return out;
  }

  void raw_put(std::size_t slot, int node, const std::vector<int>& gpus) {
    const model::GpuRequest& r = req(slot);
    State& s = nodes_[node];
    s.cpu -= r.host.cpu_milli;
    s.memory -= r.host.memory_mib;
    for (int g : gpus) {
      Gpu& gpu = s.gpus[g];
      if (gpu.used == 0 && !gpu.whole) --s.idle;
      gpu.whole = r.kind == model::RequestKind::kWhole;
      gpu.used += gpu.whole ? kFull : r.shared.compute_milli;
      gpu.slots.push_back(slot);
    }
    s.slots.push_back(slot);
    at_[slot] = node;
    gpus_[slot] = gpus;
  }
  void raw_take(std::size_t slot) {
    const model::GpuRequest& r = req(slot);
    State& s = nodes_[at_[slot]];
    s.cpu += r.host.cpu_milli;
    s.memory += r.host.memory_mib;
    for (int g : gpus_[slot]) {
      Gpu& gpu = s.gpus[g];
      gpu.used -= gpu.whole ? kFull : r.shared.compute_milli;
      gpu.whole = false;
      std::erase(gpu.slots, slot);
      if (gpu.used == 0) ++s.idle;
    }
    std::erase(s.slots, slot);
    at_[slot] = -1;
    gpus_[slot].clear();
  }
  void put(std::size_t slot, int node, const std::vector<int>& gpus) {
    journal_.push_back({slot, -1, {}});
    raw_put(slot, node, gpus);
  }
  void take(std::size_t slot) {
    journal_.push_back({slot, at_[slot], gpus_[slot]});
    raw_take(slot);
  }
  void rollback(std::size_t mark) {
    while (journal_.size() > mark) {
      Undo u = std::move(journal_.back());
      journal_.pop_back();
      if (at_[u.slot] >= 0) raw_take(u.slot);
      if (u.node >= 0) raw_put(u.slot, u.node, u.gpus);
    }
  }

  // The GPUs the pod takes on the node as it stands (a share: on `only` if set, else the
  // fullest GPU that takes it), and how much room the pick leaves (lower is tighter).
  std::optional<std::pair<std::int64_t, std::vector<int>>> fit(std::size_t slot, int node,
                                                               int only = -1) const {
    const model::GpuRequest& r = req(slot);
    const State& s = nodes_[node];
    if (s.cpu < r.host.cpu_milli || s.memory < r.host.memory_mib) return std::nullopt;
    std::vector<int> picked;
    if (r.kind == model::RequestKind::kNone) return std::pair{s.cpu - r.host.cpu_milli, picked};
    if (r.kind == model::RequestKind::kWhole) {
      for (std::size_t g = 0; g < s.gpus.size() && static_cast<int>(picked.size()) < r.whole; ++g)
        if (s.gpus[g].used == 0 && !s.gpus[g].whole) picked.push_back(static_cast<int>(g));
      if (static_cast<int>(picked.size()) < r.whole) return std::nullopt;
      return std::pair{(s.idle - r.whole) * 1000000LL + s.cpu - r.host.cpu_milli, picked};
    }
    int best = -1;
    for (std::size_t g = 0; g < s.gpus.size(); ++g) {
      const Gpu& gpu = s.gpus[g];
      if ((only >= 0 && static_cast<int>(g) != only) || gpu.whole ||
          gpu.used + r.shared.compute_milli > kFull)
        continue;
      if (best < 0 || gpu.used > s.gpus[best].used) best = static_cast<int>(g);
    }
    if (best < 0) return std::nullopt;
    const std::int64_t room = kFull - s.gpus[best].used - r.shared.compute_milli;
    return std::pair{room * 1000 + s.idle, std::vector<int>{best}};
  }

  bool allowed(std::size_t slot, int type) const {
    const int shape = in_.pod_shape[slot];
    return shape < 0 ? host_only(slot) : in_.shapes[shape].allowed_on(in_.types[type]);
  }

  // The pod where it leaves the least room, as things stand. False: it fits nowhere.
  bool insert(std::size_t slot) {
    std::optional<std::pair<std::int64_t, std::vector<int>>> best;
    int where = -1;
    auto consider = [&](int n) {
      auto f = fit(slot, n);
      if (f && (!best || f->first < best->first)) {
        best = std::move(f);
        where = n;
      }
    };
    for (std::size_t t = 0; t < of_type_.size(); ++t) {
      if (!allowed(slot, static_cast<int>(t))) continue;
      for (int n : of_type_[t]) consider(n);
    }
    if (host_only(slot))
      for (int n : gpuless_) consider(n);
    if (!best) return false;
    put(slot, where, best->second);
    return true;
  }

  // Adds to `spot` the cheapest pods of the node (the least GPU milli, then the most CPU and
  // memory) until the pod's CPU and memory fit. False: they cannot.
  bool free_host(std::size_t slot, const State& s, Spot& spot) const {
    const model::GpuRequest& r = req(slot);
    std::int64_t cpu = s.cpu, memory = s.memory;
    for (std::size_t v : spot.victims) {
      cpu += req(v).host.cpu_milli;
      memory += req(v).host.memory_mib;
    }
    if (cpu >= r.host.cpu_milli && memory >= r.host.memory_mib) return true;
    std::vector<std::size_t> more;
    for (std::size_t v : s.slots)
      if (!locked_[v] &&
          std::find(spot.victims.begin(), spot.victims.end(), v) == spot.victims.end())
        more.push_back(v);
    auto key = [&](std::size_t v) {
      return std::make_tuple(value(v), -req(v).host.cpu_milli, -req(v).host.memory_mib, v);
    };
    std::sort(more.begin(), more.end(), [&](auto a, auto b) { return key(a) < key(b); });
    for (std::size_t v : more) {
      if (cpu >= r.host.cpu_milli && memory >= r.host.memory_mib) break;
      cpu += req(v).host.cpu_milli;
      memory += req(v).host.memory_mib;
      spot.victims.push_back(v);
      spot.cost += value(v);
    }
    return cpu >= r.host.cpu_milli && memory >= r.host.memory_mib;
  }

  // Whole GPUs: the GPUs cheapest to empty (per GPU freed: a whole-GPU pod frees its GPUs, a
  // shared GPU frees once all its shares leave), until enough are idle.
  std::optional<Spot> whole_spot(std::size_t slot, int node) const {
    const State& s = nodes_[node];
    Spot spot{node, -1, {}, 0};
    int idle = s.idle;
    struct Blocker {
      std::int64_t cost = 0;
      int gpus = 0;
      std::vector<std::size_t> slots;
    };
    std::vector<Blocker> blockers;
    for (const Gpu& g : s.gpus) {
      if (g.used == 0 && !g.whole) continue;
      bool movable = true;
      for (std::size_t v : g.slots) movable = movable && !locked_[v];
      if (!movable) continue;
      if (g.whole) {
        const std::size_t v = g.slots.front();
        if (gpus_[v].front() != static_cast<int>(&g - s.gpus.data())) continue;  // counted once
        blockers.push_back({value(v), static_cast<int>(gpus_[v].size()), {v}});
      } else {
        Blocker b{0, 1, g.slots};
        for (std::size_t v : g.slots) b.cost += value(v);
        blockers.push_back(std::move(b));
      }
    }
    std::stable_sort(blockers.begin(), blockers.end(), [](const Blocker& a, const Blocker& b) {
      return a.cost * b.gpus < b.cost * a.gpus;
    });
    for (const Blocker& b : blockers) {
      if (idle >= req(slot).whole) break;
      idle += b.gpus;
      spot.cost += b.cost;
      spot.victims.insert(spot.victims.end(), b.slots.begin(), b.slots.end());
    }
    if (idle < req(slot).whole || !free_host(slot, s, spot)) return std::nullopt;
    return spot;
  }

  // A share: on the node's GPU cheapest to make room on (its smallest shares leave first),
  // costing less than `bound`.
  std::optional<Spot> share_spot(std::size_t slot, int node, std::int64_t bound) const {
    const State& s = nodes_[node];
    const int q = req(slot).shared.compute_milli;
    std::optional<Spot> best;
    for (std::size_t g = 0; g < s.gpus.size(); ++g) {
      const Gpu& gpu = s.gpus[g];
      // What leaves must hold at least the compute missing: a bound on the cost.
      if (gpu.whole || gpu.used + q - kFull >= (best ? best->cost + 1 : bound)) continue;
      Spot spot{node, static_cast<int>(g), {}, 0};
      int used = gpu.used;
      if (used + q > kFull) {
        scratch_ = gpu.slots;
        std::sort(scratch_.begin(), scratch_.end(), [&](auto a, auto b) {
          return std::pair{value(a), a} < std::pair{value(b), b};
        });
        for (std::size_t v : scratch_) {
          if (used + q <= kFull || locked_[v]) continue;
          used -= static_cast<int>(value(v));
          spot.victims.push_back(v);
          spot.cost += value(v);
        }
      }
      if (used + q > kFull) continue;
      if (best &&
          std::pair{spot.cost, spot.victims.size()} >= std::pair{best->cost, best->victims.size()})
        continue;
      best = std::move(spot);
    }
    if (!best || !free_host(slot, s, *best) || best->cost >= bound) return std::nullopt;
    return best;
  }

  // The `most` places cheapest to clear for the pod (pods must move; they hold less than twice
  // its GPU milli), over every node it is allowed on, the cheapest first.
  std::vector<Spot> spots(std::size_t slot, int most) const {
    auto key = [](const Spot& s) { return std::tuple{s.cost, s.victims.size(), s.node, s.gpu}; };
    std::vector<Spot> kept;
    for (std::size_t t = 0; t < of_type_.size(); ++t) {
      if (!allowed(slot, static_cast<int>(t))) continue;
      for (int n : of_type_[t]) {
        const std::int64_t bound = static_cast<int>(kept.size()) < most
                                       ? value(slot) * 2
                                       : kept.back().cost + 1;  // ties may still win on key
        std::optional<Spot> s = req(slot).kind == model::RequestKind::kWhole
                                    ? whole_spot(slot, n)
                                    : share_spot(slot, n, bound);
        if (!s || s->victims.empty() || s->cost >= bound) continue;
        auto at = std::upper_bound(kept.begin(), kept.end(), *s,
                                   [&](const Spot& a, const Spot& b) { return key(a) < key(b); });
        kept.insert(at, std::move(*s));
        if (static_cast<int>(kept.size()) > most) kept.pop_back();
      }
    }
    return kept;
  }

  // Places the (left out) pod directly, else through an ejection chain `depth` levels deep.
  // Returns the GPU milli gained (> 0: the state changed; 0: it is as it was, but for a pod
  // without GPUs, which may have been placed).
  std::int64_t try_place(std::size_t slot, int depth) {
    if (insert(slot)) return value(slot);
    if (depth == 0 || value(slot) == 0) return 0;
    const std::vector<Spot> tried = spots(slot, kTried[depth]);
    std::int64_t best = 0;
    int best_at = -1;
    for (std::size_t i = 0; i < tried.size(); ++i) {
      const std::size_t mark = journal_.size();
      const std::int64_t gain = clear_and_place(slot, tried[i], depth);
      if (gain == value(slot)) return gain;  // every pod moved found a place: keep it
      if (gain > best) {
        best = gain;
        best_at = static_cast<int>(i);
      }
      rollback(mark);
    }
    if (best_at < 0) return 0;
    return clear_and_place(slot, tried[best_at], depth);  // the same moves again: deterministic
  }

  std::int64_t clear_and_place(std::size_t slot, const Spot& spot, int depth) {
    for (std::size_t v : spot.victims) take(v);
    auto f = fit(slot, spot.node, spot.gpu);
    if (!f) return -1;  // the spot's arithmetic was wrong; the caller rolls it back
    put(slot, spot.node, f->second);
    std::vector<std::size_t> chain{slot};
    locked_[slot] = 1;
    std::int64_t gain = value(slot) - spot.cost;
    std::vector<std::size_t> victims = spot.victims;
    std::stable_sort(victims.begin(), victims.end(),
                     [&](auto a, auto b) { return value(a) > value(b); });
    for (std::size_t v : victims) {
      gain += try_place(v, depth - 1);
      if (at_[v] >= 0) {
        locked_[v] = 1;
        chain.push_back(v);
      }
    }
    for (std::size_t c : chain) locked_[c] = 0;
    return gain;
  }

  const Workload& w_;
  const LimitInstance& in_;
  std::vector<State> nodes_;
  std::vector<std::vector<int>> of_type_;
  std::vector<int> gpuless_;  // nodes without GPUs: only pods without GPUs go there
  std::vector<int> at_;
  std::vector<std::vector<int>> gpus_;
  std::vector<std::int64_t> value_;  // per slot: the GPU milli it holds once placed
  std::vector<char> locked_;         // placed in the chain being built: not to be ejected by it
  std::vector<Undo> journal_;
  mutable std::vector<std::size_t> scratch_;  // share_spot's shares of one GPU, sorted
};

}  // namespace

std::int64_t packed_milli(const Workload& w, const LimitInstance& in, const Packing& p) {
  std::int64_t milli = 0;
  for (std::size_t i = 0; i < p.node.size() && i < in.pods.size(); ++i)
    if (p.node[i] >= 0) milli += value_of(w.requests[in.pods[i]]);
  return milli;
}

Packing repair_packing(const std::vector<model::Node>& nodes, const Workload& w,
                       const LimitInstance& in, Packing start, RepairStats* stats) {
  Search s(nodes, w, in, start);
  s.run(stats);
  return s.result();
}

}  // namespace gapless::bench
