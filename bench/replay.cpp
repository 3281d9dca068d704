// The paper's experiment (replay.h): the workload prepared, the arrivals tuned to 130 %, the
// static replay through a Placer. The dynamic mode is in replay_dynamic.cpp.
#include "replay.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <numeric>

#include "placer.h"
#include "rng.h"

namespace gapless::bench {
namespace {

std::string class_key(const model::GpuRequest& r) {
  std::string key = std::to_string(static_cast<int>(r.kind)) + "/" + std::to_string(r.whole) + "/" +
                    std::to_string(r.shared.compute_milli) + "/" +
                    std::to_string(r.host.cpu_milli) + "/" + std::to_string(r.host.memory_mib);
  for (const std::string& m : r.models) key += "/" + m;
  return key;
}

}  // namespace

placement::Policy policy_of(const PolicySetup& setup) {
  placement::Policy p;
  p.source = "bench";
  p.profiles = {setup.profile};
  p.default_profile = setup.profile.name;
  p.consolidation = setup.consolidation;
  return p;
}

std::int64_t granted_milli(const model::Allocation& a) {
  std::int64_t sum = 0;
  for (const model::GpuGrant& g : a.gpus)
    sum += g.whole() ? model::kFullComputeMilli : g.compute_milli;
  return sum;
}

Workload prepare_workload(std::string name, std::vector<TracePod> pods) {
  Workload w;
  w.name = std::move(name);
  std::stable_sort(pods.begin(), pods.end(),
                   [](const TracePod& a, const TracePod& b) { return a.name < b.name; });
  w.pods = std::move(pods);
  std::map<std::string, int> classes;
  placement::ShapeCounts counts;
  for (const TracePod& p : w.pods) {
    w.requests.push_back(to_request(p));
    const auto [it, added] = classes.emplace(class_key(w.requests.back()), w.classes);
    if (added) ++w.classes;
    w.request_class.push_back(it->second);
    counts[placement::shape_of(w.requests.back())] += 1;
  }
  w.oracle = placement::typical_mix(counts);
  return w;
}

std::int64_t gpu_capacity_milli(const std::vector<model::Node>& nodes) {
  std::int64_t sum = 0;
  for (const model::Node& n : nodes)
    sum += static_cast<std::int64_t>(n.gpus.size()) * model::kFullComputeMilli;
  return sum;
}

Arrivals make_arrivals(const Workload& w, std::int64_t capacity_milli, std::size_t node_count,
                       std::uint64_t seed, double ratio) {
  Rng rng(seed);
  Arrivals a;
  a.order.resize(w.pods.size());
  std::iota(a.order.begin(), a.order.end(), 0);
  for (std::size_t i = a.order.size(); i > 1; --i) std::swap(a.order[i - 1], a.order[rng.below(i)]);

  const double target = ratio * static_cast<double>(capacity_milli);
  std::int64_t total = 0;
  for (const TracePod& p : w.pods) total += p.gpu_request();
  while (static_cast<double>(total) > target && !a.order.empty()) {
    const std::size_t k = rng.below(a.order.size());
    total -= w.pods[a.order[k]].gpu_request();
    a.order.erase(a.order.begin() + static_cast<std::ptrdiff_t>(k));
  }
  if (static_cast<double>(total) < target && !w.pods.empty()) {
    for (;;) {
      const int k = static_cast<int>(rng.below(w.pods.size()));
      if (static_cast<double>(total + w.pods[k].gpu_milli) > target) break;
      total += w.pods[k].gpu_request();
      a.order.push_back(k);
    }
  }
  a.node_priority.resize(node_count);
  std::iota(a.node_priority.begin(), a.node_priority.end(), 0);
  for (std::size_t i = node_count; i > 1; --i) {
    std::swap(a.node_priority[i - 1], a.node_priority[rng.below(i)]);
  }
  return a;
}

RunResult replay(const std::vector<model::Node>& nodes, const Workload& w, const Arrivals& a,
                 const PolicySetup& policy, std::uint64_t seed) {
  const auto start = std::chrono::steady_clock::now();
  Placer placer(nodes, w, policy, a.node_priority, seed, /*track_oracle=*/true);
  RunResult out;
  out.events.reserve(a.order.size());
  std::int64_t arrived = 0, used = 0;
  for (std::size_t step = 0; step < a.order.size(); ++step) {
    const int pod = a.order[step];
    const std::string uid = "pod-" + std::to_string(step);
    placer.observe(pod, uid);
    arrived += w.pods[pod].gpu_request();
    std::int64_t granted = 0;
    if (placer.place(pod, uid, &granted) < placer.node_count()) {
      used += granted;
      ++out.placed;
    } else {
      ++out.failed;
    }
    out.events.push_back({arrived, used, placer.oracle_total()});
  }
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

}  // namespace gapless::bench
