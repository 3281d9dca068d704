// PostFilter (preemption) with GPUs in view: which lower-priority pods on one node to evict so
// that a pod of priority P fits there: an NVLink set of the right size, vRAM and compute on one
// GPU for shares, a MIG slot for MIG.
//
// kube-scheduler proposes victims per node from a dry run that sees only GPU counts (and no
// shares or MIG slots at all); select_victims replaces the GPU-holding part of that proposal with
// the smallest set that frees GPUs the pod can really use, and keeps the rest (pods it evicts for
// CPU, memory or ports, which Gapless cannot judge).
//
// The choice, among pods of priority < P holding GPUs or MIG instances on the node, is the
// smallest set by, in order:
//   1. fewest pods;
//   2. fewest pods kube-scheduler did not propose (it proposes PodDisruptionBudget-violating
//      pods last, so a pod it left alone may be protected by one);
//   3. lowest highest priority among them, then lowest sum of priorities;
//   4. least GPU work lost (victim_gpu_milli: GPU-milli held);
//   5. the first set in the candidates' order (priority, GPU work, UID): deterministic.
// Search bound: every set of k pods is tried for k = 1, 2, ... while the sets tried stay within
// kMaxVictimSetsTried; past it, a greedy pass (evict every candidate, then spare the most
// important one by one while the pod still fits) gives a set from which no pod can be spared,
// though not always the smallest.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gapless/model/allocation.h"
#include "gapless/model/node.h"
#include "gapless/model/request.h"

namespace gapless::placement {

// About 1 µs a set on an 8-GPU node: at most about 5 ms per node, against kube-scheduler's 5 s
// extender timeout for all the nodes it offers (100 by default).
inline constexpr std::size_t kMaxVictimSetsTried = 5000;

// A victim kube-scheduler proposed: its UID, and its priority when the request carried the whole
// pod (NodeNameToVictims); without it Gapless uses the model's, or assumes the highest it can
// be (P - 1).
struct ProposedVictim {
  std::string uid;
  std::optional<std::int32_t> priority;
};

struct VictimChoice {
  // UIDs to evict, highest priority first (kube-scheduler reads the first as the highest when it
  // picks a node). When the pod's GPUs fit without evicting anyone, kube-scheduler's proposal
  // (its reasons are CPU, memory and the like); empty if it proposed none.
  std::vector<std::string> victims;
  // How many of `victims` kube-scheduler did not propose.
  int unproposed = 0;
  // GPU-milli the GPU-holding victims hold (victim_gpu_milli summed).
  std::int64_t gpu_milli = 0;
  // False when the search bound was hit and the greedy pass chose.
  bool exhaustive = true;
};

// GPU work a pod loses when evicted, in GPU-milli: 1000 per whole GPU; for a share the larger
// of its compute and its vRAM fraction of the GPU (gpushare units as a fraction of capacity);
// for a MIG instance its compute slices out of 7.
std::int64_t victim_gpu_milli(const model::Node& node, const model::Allocation& a);

// The victims on `node` (pods in `on_node` are the allocations on it) for a pod of `priority`
// asking `req`. Nullopt when even evicting every lower-priority pod would not make it fit (or the
// node is fenced). Proposed victims that hold no GPU on this node are kept in the answer; any
// victim of known priority >= `priority` never is.
std::optional<VictimChoice> select_victims(const model::Node& node,
                                           const std::vector<const model::Allocation*>& on_node,
                                           const model::GpuRequest& req, std::int32_t priority,
                                           const std::vector<ProposedVictim>& proposed);

}  // namespace gapless::placement
