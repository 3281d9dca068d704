// Consolidation: make room for a waiting pod that no node fits by moving the fewest movable pods
// off one node, each to a place it fits elsewhere (docs/consolidation.md).
//
// Movable: an allocation whose Movability is kOptedIn, or kByPolicy with a priority below the
// policy's threshold (model/allocation.h: the driver never marks kube-system, DaemonSet or
// controller-less pods), of priority no higher than the waiting pod's, holding GPUs or MIG
// instances, not moved within the policy's cooldown (MoveLedger).
//
// The plan, among every node where evicting some movable pods lets the pod fit, is the set of
// evictions smallest by, in order:
//   1. fewest evictions (at most rules.max_moves);
//   2. least GPU-time lost (victim_gpu_milli x time since the pod started; 0 when unknown);
//   3. least GPU work held (victim_gpu_milli summed);
//   4. node name, then the evicted UIDs: deterministic.
// A set is a plan only when every evicted pod is placed again elsewhere: the engine's own pick
// (quick_fit, score_fitting_node, tie_break_rank, choose) on the model without the set and
// without the target node, one pod after the other (largest first), each seeing the ones before
// it. The request each is placed with is the driver's (ConsolidationQuery::request_of) or, when
// it has none, one derived from what the pod holds (held_request): the same GPU model, an
// NVLink-connected set when its GPUs were, the same MIG profile or share. A set over the rate
// limits (ConsolidationQuery::within_limits) is skipped.
//
// Chains: only when no such plan exists within rules.max_moves, the sets are tried again (same
// order) letting one evicted pod that fits nowhere take a chain: the fewest movable pods of one
// other node (not the target, not one the simulation already changed) whose eviction lets it fit
// there, each placed again elsewhere without a further chain; the chain's evictions count against
// rules.max_moves and the rate limits, its moves come first in the plan (search.chained). At most
// kMaxChainChecks sets (first-level and chain) are simulated for chains per call.
//
// Search bounds: a node with more than kMaxVictimSetsTried sets of one size is not searched at
// that size, and at most kMaxPlacementChecks sets are simulated per call; either sets
// exhaustive = false (a plan found is still the best of those searched).
//
// Thread-safety: plan_consolidation only reads; MoveLedger is a plain value (its owner locks).
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "gapless/model/allocation.h"
#include "gapless/model/cluster.h"
#include "gapless/model/request.h"
#include "gapless/placement/consolidation_rules.h"
#include "gapless/placement/profile.h"

namespace gapless::placement {

// Each simulation scores every node once per evicted pod: bounded so a call stays in tens of ms.
inline constexpr std::size_t kMaxPlacementChecks = 64;
// Chains (a pod moved to make room for another move) get their own, smaller budget: on the
// bench's traces 4 found every chain plan 64 did, and each check here costs a search of the
// whole cluster for the chain's node besides the simulation.
inline constexpr std::size_t kMaxChainChecks = 8;

// Whether the rules let consolidation move the pod (the header's first paragraph, but for the
// priority against the waiting pod's and the cooldown).
bool is_movable(const model::Allocation& a, const ConsolidationRules& rules);

// One eviction of a plan: the pod, where it is, where the simulation placed it again, and what
// evicting it costs.
struct PlannedMove {
  std::string pod_uid;
  std::string pod_ns;
  std::string pod_name;
  std::string from;
  std::string to;
  std::int64_t gpu_milli = 0;  // victim_gpu_milli
  double gpu_seconds = 0;      // GPU-time lost: gpu_milli / 1000 x seconds since it started
};

struct ConsolidationPlan {
  std::string node;                // the node the waiting pod fits once the moves are done
  std::vector<PlannedMove> moves;  // in re-placement order (largest first)
  std::int64_t gpu_milli = 0;      // summed over moves
  double gpu_seconds = 0;          // summed over moves
};

// The plan, if any, and the search behind it: why this plan, or why none.
struct ConsolidationSearch {
  std::optional<ConsolidationPlan> plan;
  bool fits_now = false;              // a node fits the pod as it is: nothing to plan
  std::size_t nodes_considered = 0;   // nodes where evicting every movable pod lets it fit
  std::size_t sets_fitting = 0;       // sets tried (up to the plan's size) that free enough room
  std::size_t sets_unplaceable = 0;   // of those, refused: a pod could not be placed elsewhere
  std::size_t sets_rate_limited = 0;  // of those, refused by the rate limits
  bool exhaustive = true;             // false when a search bound cut the search short
  bool chained = false;               // the plan takes a chain (moves from a second node)
};

struct ConsolidationQuery {
  ConsolidationRules rules;
  double now_s = 0;  // the driver's clock, for GPU-time lost and the limits
  bool check_host = true;
  // The request an evicted pod is placed again with; nullopt or unset: held_request.
  std::function<std::optional<model::GpuRequest>(const model::Allocation&)> request_of;
  // When a pod started, on the driver's clock (< 0 or unset: unknown, no GPU-time counted).
  std::function<double(const model::Allocation&)> started_at;
  // Whether a pod may be moved at all now (the per-pod cooldown); unset: yes.
  std::function<bool(const model::Allocation&)> may_move;
  // Nodes held for other pods (the drain target, rooms held after earlier plans): the pod does
  // not fit there now, they are never its plan's node, and no evicted pod is placed on them.
  std::vector<std::string> withheld;
  // Whether these evictions together stay within the rate limits; unset: yes.
  std::function<bool(const std::vector<const model::Allocation*>&)> within_limits;
};

// What an allocation holds, as a request that asks at least as much: nullopt when it holds
// nothing, or grants of mixed kinds or sizes the engine could not ask for in one request.
std::optional<model::GpuRequest> held_request(const model::Node& node, const model::Allocation& a);

// The plan for a pod of `priority` asking `req`; none when a node fits it now, or no set of at
// most rules.max_moves movable pods both frees a node for it and can be placed elsewhere.
ConsolidationSearch plan_consolidation(const model::Cluster& cluster, const model::GpuRequest& req,
                                       std::int32_t priority, const Profile& profile,
                                       const ConsolidationQuery& query);

// One sentence on the search: the plan and why it was chosen, or why there is none.
std::string describe(const ConsolidationSearch& search, const ConsolidationRules& rules);

// The moves made, for the rate limits: deterministic, on the driver's clock.
class MoveLedger {
 public:
  // Whether the pod was moved within rules.pod_cooldown_s of now_s.
  bool cooling_down(const std::string& pod_uid, double now_s,
                    const ConsolidationRules& rules) const;
  // Whether evicting `pods` now keeps the last 60 s within per_minute and per_namespace_per_minute.
  bool allows(const std::vector<const model::Allocation*>& pods, double now_s,
              const ConsolidationRules& rules) const;
  // Records a plan's moves at now_s and forgets moves older than any window can see.
  void record(const ConsolidationPlan& plan, double now_s, const ConsolidationRules& rules);
  std::size_t size() const { return moves_.size(); }

 private:
  struct Moved {
    double at = 0;
    std::string ns;
    std::string uid;
  };
  std::deque<Moved> moves_;  // oldest first
};

}  // namespace gapless::placement
