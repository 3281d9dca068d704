#include "replay.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <numeric>

#include "gapless/model/cluster.h"
#include "gapless/placement/choice.h"
#include "gapless/placement/engine.h"
#include "gapless/placement/fit.h"
#include "gapless/placement/fragmentation.h"
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

std::int64_t granted_milli(const model::Allocation& a) {
  std::int64_t sum = 0;
  for (const model::GpuGrant& g : a.gpus)
    sum += g.whole() ? model::kFullComputeMilli : g.compute_milli;
  return sum;
}

// Node scores of the current pod's request class, reused until the node changes: a node's score
// depends only on its own state and the request (and on the mix, whose changes flush everything).
class ScoreMemo {
 public:
  ScoreMemo(std::size_t nodes, int classes)
      : classes_(classes),
        version_(nodes, 1),
        stamp_(nodes * classes, 0),
        score_(nodes * classes) {}
  bool get(std::size_t node, int cls, double* score) const {
    const std::size_t k = node * classes_ + cls;
    if (stamp_[k] != version_[node]) return false;
    *score = score_[k];
    return true;
  }
  void put(std::size_t node, int cls, double score) {
    const std::size_t k = node * classes_ + cls;
    stamp_[k] = version_[node];
    score_[k] = score;
  }
  void changed(std::size_t node) { version_[node] = ++clock_; }
  void flush() {
    for (std::uint32_t& v : version_) v = ++clock_;
  }

 private:
  std::size_t classes_;
  std::uint32_t clock_ = 1;
  std::vector<std::uint32_t> version_, stamp_;
  std::vector<double> score_;
};

bool uses_draw(const placement::Profile& p) {
  for (const auto& ws : p.node)
    if (ws.strategy->uses_draw()) return true;
  for (const auto& ws : p.gpu)
    if (ws.strategy->uses_draw()) return true;
  return false;
}

}  // namespace

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
  model::Cluster cluster;
  for (const model::Node& n : nodes) cluster.upsert_node(n);
  const std::vector<const model::Node*> ptrs = cluster.nodes();
  const std::size_t count = ptrs.size();

  placement::FragmentCache oracle(w.oracle);
  oracle.rebuild(ptrs);
  placement::WorkloadLearner learner;
  std::unique_ptr<placement::FragmentCache> learned;
  placement::Profile profile = policy.profile;
  if (policy.oracle_mix) {
    profile.context.workload = &w.oracle;
    profile.context.fragments = &oracle;
  } else {
    learned = std::make_unique<placement::FragmentCache>(learner.mix());
    profile.context.workload = &learner.mix();
    profile.context.fragments = learned.get();
  }
  // A strategy that reads the per-pod draw scores anew for every pod; feasibility still keeps.
  const bool redraw = uses_draw(profile);
  ScoreMemo memo(count, w.classes);
  Rng draws(seed ^ 0x5eed5eed5eed5eedULL);

  RunResult out;
  out.events.reserve(a.order.size());
  std::int64_t arrived = 0, used = 0;
  for (std::size_t step = 0; step < a.order.size(); ++step) {
    const int pod = a.order[step];
    const model::GpuRequest& req = w.requests[pod];
    const int cls = w.request_class[pod];
    if (learned && learner.observe(placement::shape_of(req, /*with_memory=*/true))) {
      learned->rebuild(ptrs);
      memo.flush();
    }
    profile.context.draw = draws.next();
    arrived += w.pods[pod].gpu_request();

    std::size_t best = count;
    double best_score = -1;
    for (std::size_t n = 0; n < count; ++n) {
      double s;
      if (!memo.get(n, cls, &s)) {
        s = placement::quick_fit(*ptrs[n], req).code == placement::FitCode::kFits
                ? placement::score_fitting_node(*ptrs[n], req, profile)
                : -1.0;
        memo.put(n, cls, s);
      } else if (redraw && s >= 0) {
        s = placement::score_fitting_node(*ptrs[n], req, profile);
      }
      if (s < 0) continue;
      if (s > best_score || (s == best_score && a.node_priority[n] < a.node_priority[best])) {
        best = n;
        best_score = s;
      }
    }
    std::optional<placement::Choice> choice;
    if (best < count) choice = placement::choose(*ptrs[best], req, profile);
    if (choice) {
      model::Allocation alloc;
      alloc.pod_uid = "pod-" + std::to_string(step);
      alloc.pod_name = w.pods[pod].name;
      alloc.node = ptrs[best]->name;
      alloc.gpus = std::move(choice->gpus);
      alloc.host = req.host;
      if (cluster.commit(alloc).ok()) {
        used += granted_milli(alloc);
        memo.changed(best);
        oracle.update(*ptrs[best]);
        if (learned) learned->update(*ptrs[best]);
        ++out.placed;
      } else {
        choice.reset();
      }
    }
    if (!choice) ++out.failed;
    out.events.push_back({arrived, used, oracle.total()});
  }
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

}  // namespace gapless::bench
