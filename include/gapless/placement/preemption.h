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
//   1. fewest PodDisruptionBudget violations (as kube-scheduler counts them: victims taken most
//      important first, each taking one of its budgets' allowed disruptions; a victim that takes
//      a budget below zero violates it). kube-scheduler reprieves violating victims first and
//      ranks nodes by fewest violations first; the same order here keeps both in step;
//   2. fewest pods;
//   3. fewest pods kube-scheduler did not propose (without budgets, a pod it left alone may be
//      protected by one: it proposes PDB-violating pods last);
//   4. lowest highest priority among them, then lowest sum of priorities;
//   5. least GPU work lost (victim_gpu_milli: GPU-milli held);
//   6. the first set in the candidates' order (priority, GPU work, UID): deterministic.
// Search bound: every set of k pods is tried for k = 1, 2, ... while the sets tried stay within
// kMaxVictimSetsTried; past it, a greedy pass (evict every candidate, then spare the most
// important one by one while the pod still fits) gives a set from which no pod can be spared,
// though not always the smallest.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gapless/model/allocation.h"
#include "gapless/model/disruption_budget.h"
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

// PodDisruptionBudgets, resolved by the driver into the pod UIDs each covers.
using DisruptionBudget = model::DisruptionBudget;

// Victims (UIDs with priorities) that violate a budget, counted as kube-scheduler's
// filterPodsWithPDBViolation does: most important first (priority, then UID), each decrementing
// every budget covering it; it violates if one goes below zero.
int pdb_violations(std::vector<std::pair<std::int32_t, std::string>> victims,
                   const std::vector<DisruptionBudget>& budgets);

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
  // Victims that violate a budget (pdb_violations over all of `victims`); 0 without budgets.
  int pdb_violations = 0;
};

// GPU work a pod loses when evicted, in GPU-milli: 1000 per whole GPU; for a share the larger
// of its compute and its vRAM fraction of the GPU (gpushare units as a fraction of capacity);
// for a MIG instance its compute slices out of 7.
std::int64_t victim_gpu_milli(const model::Node& node, const model::Allocation& a);

// The victims on `node` (pods in `on_node` are the allocations on it) for a pod of `priority`
// asking `req`. Nullopt when even evicting every lower-priority pod would not make it fit (or the
// node is fenced). Proposed victims that hold no GPU on this node are kept in the answer; any
// victim of known priority >= `priority` never is. `budgets`: the PodDisruptionBudgets in force.
std::optional<VictimChoice> select_victims(const model::Node& node,
                                           const std::vector<const model::Allocation*>& on_node,
                                           const model::GpuRequest& req, std::int32_t priority,
                                           const std::vector<ProposedVictim>& proposed,
                                           const std::vector<DisruptionBudget>& budgets = {});

}  // namespace gapless::placement
