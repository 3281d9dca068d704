// Types, shapes and the arrived pods of a limit instance (limit.h).
#include "limit.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <tuple>

#include "lp_bound.h"
#include "offline_pack.h"

namespace gapless::bench {

bool PodShape::allowed_on(const NodeType& t) const {
  if (cpu_milli > t.cpu_milli || memory_mib > t.memory_mib) return false;
  if (t.gpus == 0 || whole > t.gpus) return false;
  return models.empty() || std::find(models.begin(), models.end(), t.model) != models.end();
}

std::vector<int> arrived_at_full(const Workload& w, const Arrivals& a, std::int64_t capacity) {
  std::vector<int> pods;
  std::int64_t arrived = 0;
  for (int pod : a.order) {
    if (pod < 0 || static_cast<std::size_t>(pod) >= w.pods.size()) continue;
    pods.push_back(pod);
    arrived += w.pods[pod].gpu_request();
    if (arrived >= capacity) break;
  }
  return pods;
}

namespace {

// Sets in->types and in->node_type. Nodes without GPUs add no GPU allocation: no type.
void group_nodes(const std::vector<model::Node>& nodes, LimitInstance* in) {
  using Key = std::tuple<std::int64_t, std::int64_t, int, std::string>;
  std::map<Key, int> index;
  for (const model::Node& n : nodes) {
    if (n.gpus.empty()) {
      in->node_type.push_back(-1);
      continue;
    }
    const Key k{n.host.cpu_milli, n.host.memory_mib, static_cast<int>(n.gpus.size()),
                n.gpus.front().model};
    const auto [it, added] = index.emplace(k, static_cast<int>(in->types.size()));
    if (added)
      in->types.push_back({std::get<0>(k), std::get<1>(k), std::get<2>(k), std::get<3>(k)});
    in->types[it->second].count += 1;
    in->node_type.push_back(it->second);
  }
}

PodShape shape_of(const model::GpuRequest& r) {
  PodShape s;
  s.cpu_milli = r.host.cpu_milli;
  s.memory_mib = r.host.memory_mib;
  if (r.kind == model::RequestKind::kWhole) s.whole = r.whole;
  if (r.kind == model::RequestKind::kShared) s.share_milli = r.shared.compute_milli;
  s.models = r.models;
  std::sort(s.models.begin(), s.models.end());
  return s;
}

}  // namespace

LimitInstance make_limit_instance(const std::vector<model::Node>& nodes, const Workload& w,
                                  const std::vector<int>& pods) {
  LimitInstance in;
  group_nodes(nodes, &in);
  in.pods = pods;
  for (const model::Node& n : nodes)
    in.capacity_milli += static_cast<std::int64_t>(n.gpus.size()) * model::kFullComputeMilli;
  using Key = std::tuple<std::int64_t, std::int64_t, int, int, std::vector<std::string>>;
  std::map<Key, int> index;
  for (int pod : pods) {
    PodShape s = shape_of(w.requests[pod]);
    in.pod_shape.push_back(-1);
    if (s.value() <= 0) continue;
    const Key k{s.cpu_milli, s.memory_mib, s.whole, s.share_milli, s.models};
    const auto [it, added] = index.emplace(k, static_cast<int>(in.shapes.size()));
    if (added) in.shapes.push_back(std::move(s));
    in.shapes[it->second].count += 1;
    in.pod_shape.back() = it->second;
  }
  return in;
}

double unallocated_pct(double allocated, std::int64_t capacity) {
  if (capacity <= 0) return 0;
  return 100.0 - 100.0 * allocated / static_cast<double>(capacity);
}

Limit compute_limit(const std::vector<model::Node>& nodes, const Workload& w, const Arrivals& a) {
  Limit out;
  const std::int64_t capacity = gpu_capacity_milli(nodes);
  const std::vector<int> pods = arrived_at_full(w, a, capacity);
  const LimitInstance in = make_limit_instance(nodes, w, pods);
  const LpBound lp = solve_lp_bound(in);
  out.bound_pct = unallocated_pct(lp.allocated_milli, capacity);
  out.lp_seconds = lp.seconds;
  out.lp_columns = lp.columns;
  out.lp_rows = lp.rows;
  const OfflinePacking packed = offline_pack(nodes, w, in, lp);
  out.offline_pct = unallocated_pct(static_cast<double>(packed.allocated_milli), capacity);
  out.offline_method = packed.method;
  out.error = !lp.error.empty() ? lp.error : packed.error;
  return out;
}

}  // namespace gapless::bench
