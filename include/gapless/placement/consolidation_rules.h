// The policy's consolidation knobs (placement/consolidation.h uses them; the policy loader fills
// them from the `consolidation` section documented in policies/default.yaml). Plain values.
#pragma once

#include <cstdint>
#include <optional>

namespace gapless::placement {

// The policy's `consolidation` section (policies/default.yaml documents each knob).
struct ConsolidationRules {
  bool enabled = false;
  bool dry_run = false;  // plans are reported (explain, metrics), never applied
  // kByPolicy pods with priority < this are movable; unset: only opted-in pods are.
  std::optional<std::int32_t> movable_below_priority;
  int max_moves = 3;                 // evictions per plan, >= 1
  int per_minute = 10;               // evictions in any 60 s, cluster-wide; 0: no limit
  int per_namespace_per_minute = 5;  // evictions in any 60 s per namespace; 0: no limit
  double pod_cooldown_s = 3600;      // a pod is never moved twice within this
  // The node a plan freed stays withheld from other pods while the evicted pods terminate and
  // this long after (placement/drain.h RoomHold), so the waiting pod finds the room there.
  double hold_s = 60;
};

}  // namespace gapless::placement
