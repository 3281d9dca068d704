// The LP-guided plan (lp_plan.h).
#include "lp_plan.h"

#include <algorithm>
#include <cmath>
#include <map>

namespace gapless::bench {
namespace {

// Something that takes GPUs on one node: a whole-GPU pod, or one GPU filled with shares.
struct Item {
  std::vector<int> pods;
  int gpus = 0;
  std::int64_t cpu = 0, memory = 0;
  int milli = 0;  // shares only: compute used on the GPU

  std::int64_t value() const { return milli > 0 ? milli : 1000LL * gpus; }
};

// One node while the plan is made: what is left on it, and the items it holds on which GPUs.
struct Room {
  std::size_t node = 0;
  std::vector<int> idle;  // GPU indices
  std::int64_t cpu = 0, memory = 0;
  std::vector<std::pair<Item, std::vector<int>>> held;
};

// The pods the LP's optimum puts on each type (its counts rounded down), in arrival order.
std::vector<std::vector<int>> pods_by_type(const LimitInstance& in, const LpBound& lp) {
  const std::size_t T = in.types.size();
  std::vector<int> quota(lp.placed.size());
  for (std::size_t i = 0; i < quota.size(); ++i)
    quota[i] = static_cast<int>(std::floor(lp.placed[i] + 1e-6));
  std::vector<std::vector<int>> by_type(T);
  for (std::size_t i = 0; i < in.pods.size(); ++i) {
    const int s = in.pod_shape[i];
    if (s < 0) continue;
    for (std::size_t t = 0; t < T; ++t) {
      if (quota[s * T + t] <= 0) continue;
      --quota[s * T + t];
      by_type[t].push_back(in.pods[i]);
      break;
    }
  }
  return by_type;
}

// The GPU (an item holding shares, by compute left) a share goes to: among the tightest that
// take its compute, the first that stays within the node's CPU and memory per GPU, else the
// tightest. by_room.end(): none takes it.
std::multimap<int, std::size_t>::iterator gpu_for(std::multimap<int, std::size_t>& by_room,
                                                  const std::vector<Item>& items,
                                                  const model::GpuRequest& r, const NodeType& t) {
  constexpr int kLooked = 64;  // candidates tried for the host budget
  const std::int64_t cpu = t.cpu_milli / std::max(1, t.gpus);
  const std::int64_t memory = t.memory_mib / std::max(1, t.gpus);
  const auto first = by_room.lower_bound(r.shared.compute_milli);
  int looked = 0;
  for (auto it = first; it != by_room.end() && looked < kLooked; ++it, ++looked) {
    const Item& item = items[it->second];
    if (item.cpu + r.host.cpu_milli <= cpu && item.memory + r.host.memory_mib <= memory) return it;
  }
  return first;
}

// Whole-GPU pods as items of their own; shares packed onto GPUs best-fit decreasing, keeping
// each GPU's shares within the node's CPU and memory per GPU where they can be.
std::vector<Item> items_of(const Workload& w, const std::vector<int>& pods, const NodeType& t) {
  std::vector<Item> items;
  std::vector<int> shares;
  for (int pod : pods) {
    const model::GpuRequest& r = w.requests[pod];
    if (r.kind == model::RequestKind::kWhole)
      items.push_back({{pod}, r.whole, r.host.cpu_milli, r.host.memory_mib, 0});
    else
      shares.push_back(pod);
  }
  auto milli = [&](int pod) { return w.requests[pod].shared.compute_milli; };
  std::stable_sort(shares.begin(), shares.end(), [&](int a, int b) { return milli(a) > milli(b); });
  std::multimap<int, std::size_t> by_room;  // compute left -> item
  for (int pod : shares) {
    const model::GpuRequest& r = w.requests[pod];
    auto it = gpu_for(by_room, items, r, t);
    std::size_t i = items.size();
    if (it == by_room.end()) {
      items.push_back({{}, 1, 0, 0, 0});
    } else {
      i = it->second;
      by_room.erase(it);
    }
    Item& item = items[i];
    item.pods.push_back(pod);
    item.cpu += r.host.cpu_milli;
    item.memory += r.host.memory_mib;
    item.milli += milli(pod);
    by_room.emplace(model::kFullComputeMilli - item.milli, i);
  }
  return items;
}

bool fits(const Room& r, const Item& item) {
  return r.cpu >= item.cpu && r.memory >= item.memory &&
         static_cast<int>(r.idle.size()) >= item.gpus;
}

void put(Room& r, Item item) {
  std::vector<int> gpus(r.idle.end() - item.gpus, r.idle.end());
  r.idle.resize(r.idle.size() - item.gpus);
  r.cpu -= item.cpu;
  r.memory -= item.memory;
  r.held.emplace_back(std::move(item), std::move(gpus));
}

Item take_back(Room& r, std::size_t held) {
  auto [item, gpus] = std::move(r.held[held]);
  r.held.erase(r.held.begin() + static_cast<std::ptrdiff_t>(held));
  r.idle.insert(r.idle.end(), gpus.begin(), gpus.end());
  r.cpu += item.cpu;
  r.memory += item.memory;
  return item;
}

// The least CPU and memory per GPU among the items still to place: what any GPU left idle on a
// node needs at least to be filled later.
struct Lightest {
  double cpu = 1e300, memory = 1e300;
};
Lightest lightest(const std::vector<Item>& items, const std::vector<bool>& used) {
  Lightest l;
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (used[i]) continue;
    l.cpu = std::min(l.cpu, static_cast<double>(items[i].cpu) / items[i].gpus);
    l.memory = std::min(l.memory, static_cast<double>(items[i].memory) / items[i].gpus);
  }
  return l;
}

// Whether the node, with the item on it, keeps the host room its other idle GPUs need to be
// filled by the lightest items.
bool leaves_room(const Room& r, const Item& item, const Lightest& l) {
  const double idle = static_cast<double>(r.idle.size() - item.gpus);
  return static_cast<double>(r.cpu - item.cpu) >= idle * l.cpu &&
         static_cast<double>(r.memory - item.memory) >= idle * l.memory;
}

// The next item for the node: the first (most GPUs, then most host resources) that fits and
// leaves room to fill the rest; failing that, the lightest that fits. -1: none fits.
int next_item(const Room& r, const std::vector<Item>& items, const std::vector<bool>& used,
              const Lightest& l) {
  int lightest_fit = -1;
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (used[i] || !fits(r, items[i])) continue;
    if (leaves_room(r, items[i], l)) return static_cast<int>(i);
    if (lightest_fit < 0 || items[i].cpu < items[lightest_fit].cpu)
      lightest_fit = static_cast<int>(i);
  }
  return lightest_fit;
}

// Fills the type's nodes one at a time. Items are tried with more GPUs first (a node with room
// for a multi-GPU pod gets one), then more host resources per GPU (the heavy ones go where they
// still fit, the light ones fill what is left). Returns the items no node took.
std::vector<Item> fill_type(std::vector<Item> items, const NodeType& t, std::vector<Room*>& rooms) {
  auto share = [](std::int64_t x, std::int64_t of) {
    return static_cast<double>(x) / static_cast<double>(std::max<std::int64_t>(1, of));
  };
  auto weight = [&](const Item& i) {
    return (share(i.cpu, t.cpu_milli) + share(i.memory, t.memory_mib)) / std::max(1, i.gpus);
  };
  std::stable_sort(items.begin(), items.end(), [&](const Item& a, const Item& b) {
    return a.gpus != b.gpus ? a.gpus > b.gpus : weight(a) > weight(b);
  });
  std::vector<bool> used(items.size(), false);
  for (Room* r : rooms) {
    const Lightest l = lightest(items, used);
    for (int i = next_item(*r, items, used, l); i >= 0; i = next_item(*r, items, used, l)) {
      used[i] = true;
      put(*r, items[i]);
    }
  }
  std::vector<Item> left;
  for (std::size_t i = 0; i < items.size(); ++i)
    if (!used[i]) left.push_back(std::move(items[i]));
  return left;
}

bool models_allow(const Workload& w, const Item& item, const model::Node& n) {
  for (int pod : item.pods) {
    const std::vector<std::string>& m = w.requests[pod].models;
    if (!m.empty() && std::find(m.begin(), m.end(), n.gpus.front().model) == m.end()) return false;
  }
  return true;
}

// Where the item fits as things stand, on a node of any type: the one it leaves the fewest idle
// GPUs on, then the least CPU. nullptr: none.
Room* anywhere(const std::vector<model::Node>& nodes, const Workload& w, const Item& item,
               std::vector<Room>& rooms, const Room* except) {
  Room* best = nullptr;
  for (Room& r : rooms) {
    if (&r == except || !fits(r, item) || !models_allow(w, item, nodes[r.node])) continue;
    if (best == nullptr ||
        std::pair{r.idle.size(), r.cpu} < std::pair{best->idle.size(), best->cpu})
      best = &r;
  }
  return best;
}

// Makes room for the item on a node whose idle GPUs it could use but whose CPU or memory falls
// short, by moving one item of that node to a node where it fits as things stand.
bool make_room(const std::vector<model::Node>& nodes, const Workload& w, const Item& item,
               std::vector<Room>& rooms) {
  for (Room& r : rooms) {
    if (static_cast<int>(r.idle.size()) < item.gpus || !models_allow(w, item, nodes[r.node]))
      continue;
    for (std::size_t h = 0; h < r.held.size(); ++h) {
      const Item& moved = r.held[h].first;
      if (moved.gpus != 1 || r.cpu + moved.cpu < item.cpu || r.memory + moved.memory < item.memory)
        continue;
      Room* to = anywhere(nodes, w, moved, rooms, &r);
      if (to == nullptr) continue;
      put(*to, take_back(r, h));
      put(r, item);
      return true;
    }
  }
  return false;
}

// The items no node of their own type took: on a node of any type where they fit, else where
// moving one item away makes them fit. Largest first.
void place_elsewhere(const std::vector<model::Node>& nodes, const Workload& w,
                     std::vector<Item> items, std::vector<Room>& rooms) {
  std::stable_sort(items.begin(), items.end(),
                   [](const Item& a, const Item& b) { return a.value() > b.value(); });
  for (Item& item : items) {
    if (Room* r = anywhere(nodes, w, item, rooms, nullptr)) {
      put(*r, std::move(item));
    } else {
      make_room(nodes, w, item, rooms);
    }
  }
}

}  // namespace

std::vector<PlannedPod> plan_from_lp(const std::vector<model::Node>& nodes, const Workload& w,
                                     const LimitInstance& in, const LpBound& lp) {
  std::vector<PlannedPod> plan;
  if (!lp.error.empty() || lp.placed.size() != in.shapes.size() * in.types.size()) return plan;
  std::vector<Room> rooms;
  for (std::size_t n = 0; n < nodes.size() && n < in.node_type.size(); ++n) {
    if (in.node_type[n] < 0) continue;
    Room r{n, {}, nodes[n].host.cpu_milli, nodes[n].host.memory_mib, {}};
    for (const model::Gpu& g : nodes[n].gpus) r.idle.push_back(g.index);
    rooms.push_back(std::move(r));
  }
  const std::vector<std::vector<int>> by_type = pods_by_type(in, lp);
  std::vector<Item> left;
  for (std::size_t t = 0; t < in.types.size(); ++t) {
    std::vector<Room*> of_type;
    for (Room& r : rooms)
      if (in.node_type[r.node] == static_cast<int>(t)) of_type.push_back(&r);
    for (Item& i : fill_type(items_of(w, by_type[t], in.types[t]), in.types[t], of_type))
      left.push_back(std::move(i));
  }
  place_elsewhere(nodes, w, std::move(left), rooms);
  for (const Room& r : rooms) {
    for (const auto& [item, gpus] : r.held)
      for (int pod : item.pods) plan.push_back({pod, r.node, gpus});
  }
  return plan;
}

}  // namespace gapless::bench
