// One replay of the FGD paper's experiment (docs/packing-benchmark.md §3) through the placement
// engine: a seeded arrival sequence tuned to 130 % of GPU capacity, pods submitted one at a time,
// never leaving, dropped when no node fits, the node with the best score taken (ties: a seeded
// node order), the GPUs inside it chosen by the profile, the allocation committed to a
// model::Cluster. Records the metrics of metrics.h after every pod.
//
// Thread-safety: a Workload is read-only once prepared and may be shared by concurrent replays;
// each replay builds its own cluster and caches.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gapless/model/node.h"
#include "gapless/model/request.h"
#include "gapless/placement/profile.h"
#include "gapless/placement/workload.h"
#include "metrics.h"
#include "trace.h"

namespace gapless::bench {

// A pod list prepared for replay.
struct Workload {
  std::string name;                         // "default", "multigpu50", ...
  std::vector<TracePod> pods;               // sorted by name
  std::vector<model::GpuRequest> requests;  // aligned with pods
  std::vector<int> request_class;           // aligned: equal requests share a class
  int classes = 0;
  placement::WorkloadMix oracle;  // the untuned trace's typical pods (§2.1)
};
Workload prepare_workload(std::string name, std::vector<TracePod> pods);

// The seeded part of one run, shared by every policy (common random numbers).
struct Arrivals {
  std::vector<int> order;          // indices into Workload::pods, in submission order
  std::vector<int> node_priority;  // per node (name order): lower wins a score tie
};

// §3 with our RNG: shuffle the name-sorted pods; while the GPU request exceeds ratio x capacity
// remove a random pod; while it is below, append a random pod of the original list (stopping at
// the first whose per-GPU milli would overshoot, the simulator's quirk); then a random node
// order.
Arrivals make_arrivals(const Workload& w, std::int64_t capacity_milli, std::size_t node_count,
                       std::uint64_t seed, double ratio = 1.3);

struct PolicySetup {
  std::string label;           // as given on the command line: a strategy name or a YAML path
  placement::Profile profile;  // context is filled in by the replay
  // Score against the trace's typical pods (the FGD paper's oracle) instead of a mix learned
  // online from the pods seen so far.
  bool oracle_mix = false;
};

struct RunResult {
  std::vector<Event> events;  // one per submitted pod
  int placed = 0;
  int failed = 0;
  double seconds = 0;
};

// REQUIRES: nodes sorted by name, with arrivals made for that many nodes.
RunResult replay(const std::vector<model::Node>& nodes, const Workload& w, const Arrivals& a,
                 const PolicySetup& policy, std::uint64_t seed);

std::int64_t gpu_capacity_milli(const std::vector<model::Node>& nodes);

}  // namespace gapless::bench
