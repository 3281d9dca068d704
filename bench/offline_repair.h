// The offline packing's last step (offline_pack.h): a local search that raises the GPU milli a
// finished packing allocates. Each pod left out, largest first, goes where it fits; failing that,
// onto a node or GPU after the pods in its way are moved off (ejected), each ejected pod placed
// again the same way one level down (an ejection chain: pod A takes B's place, B takes C's, C
// goes where it fits). A chain is kept only when it raises the allocated GPU milli, so the
// search never makes a packing worse and ends; passes repeat while one helps. Deterministic.
//
// It sees GPUs as whole or shared by compute alone and CPU and memory per node (the trace
// bench's model); the caller commits the result to a model::Cluster, which refuses anything
// else, and checks it there.
#pragma once

#include <cstdint>
#include <vector>

#include "gapless/model/node.h"
#include "limit.h"
#include "replay.h"

namespace gapless::bench {

// Where each arrived pod of a limit instance is: per slot of LimitInstance::pods (a pod may
// arrive more than once), its node (an index into the nodes) and GPUs there, or node -1.
struct Packing {
  std::vector<int> node;
  std::vector<std::vector<int>> gpus;
};

struct RepairStats {
  int passes = 0;
  int placed = 0;  // chains kept
};

// GPU milli held by the packed pods (1000 per whole GPU, the compute of a share).
std::int64_t packed_milli(const Workload& w, const LimitInstance& in, const Packing& p);

// REQUIRES: `in` made from these nodes and this workload; `start` a feasible packing of it.
Packing repair_packing(const std::vector<model::Node>& nodes, const Workload& w,
                       const LimitInstance& in, Packing start, RepairStats* stats = nullptr);

}  // namespace gapless::bench
