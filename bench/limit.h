// What any placement could reach on one run (bench/README.md, "The limit"): the pods that have
// arrived when the arrived GPU request reaches 100 % of capacity, grouped into shapes, the nodes
// grouped into types, and two numbers for them: an upper bound on the GPU milli any placement,
// online or offline, can allocate (a linear program, lp_bound.h) and the GPU milli an offline
// packing that knows every pod in advance does allocate (offline_pack.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gapless/model/node.h"
#include "replay.h"

namespace gapless::bench {

// Nodes that are interchangeable for placement: same CPU, memory, GPU count and model.
struct NodeType {
  std::int64_t cpu_milli = 0;
  std::int64_t memory_mib = 0;
  int gpus = 0;
  std::string model;
  int count = 0;  // nodes of this type
};

// Pods that are interchangeable: same CPU, memory, GPU ask and allowed models.
struct PodShape {
  std::int64_t cpu_milli = 0;
  std::int64_t memory_mib = 0;
  int whole = 0;                    // whole GPUs (0 for a share or a CPU-only pod)
  int share_milli = 0;              // compute of a one-GPU share (0 otherwise)
  std::vector<std::string> models;  // empty: any
  int count = 0;                    // pods of this shape among the arrived ones

  // The GPU milli the pod holds once placed (granted_milli of its allocation).
  std::int64_t value() const { return whole > 0 ? 1000LL * whole : share_milli; }
  bool allowed_on(const NodeType& t) const;  // models, GPU count, CPU and memory
};

struct LimitInstance {
  std::vector<NodeType> types;
  std::vector<PodShape> shapes;
  std::int64_t capacity_milli = 0;  // GPU capacity of every node
  std::vector<int> pods;            // the arrived pods, indices into the Workload
  std::vector<int> pod_shape;       // aligned with pods: its shape, -1 for a pod without GPUs
  std::vector<int> node_type;       // aligned with the nodes: its type, -1 without GPUs
};

// The arrivals up to and including the first at which the arrived GPU request reaches 100 % of
// capacity (all of them if it never does), as indices into w.pods in arrival order.
std::vector<int> arrived_at_full(const Workload& w, const Arrivals& a, std::int64_t capacity);

// Groups `nodes` into types and the given pods (indices into w.pods) into shapes. Pods that ask
// nothing of a GPU get no shape: they cannot raise the GPU allocation.
LimitInstance make_limit_instance(const std::vector<model::Node>& nodes, const Workload& w,
                                  const std::vector<int>& pods);

// Unallocated GPU % of capacity when `allocated` milli are allocated.
double unallocated_pct(double allocated, std::int64_t capacity);

// The limit of one (trace, seed).
struct Limit {
  double bound_pct = 0;    // lower bound on unallocated GPU %: no placement leaves less
  double offline_pct = 0;  // unallocated GPU % of the offline packing (a real, checked placement)
  double lp_seconds = 0;   // wall time of the LP solve
  std::string offline_method;  // which offline packing won (OfflinePacking::method)
  int lp_columns = 0, lp_rows = 0;
  std::string error;  // set when the LP failed or the packing did not validate
};
// Every seed's limit on one trace.
struct LimitCell {
  std::string trace;
  std::vector<int> seeds;
  std::vector<Limit> limits;  // per seed
};

Limit compute_limit(const std::vector<model::Node>& nodes, const Workload& w, const Arrivals& a);

}  // namespace gapless::bench
