// Consolidation as the runner's Consolidate stage (placement/stage.h): for a pod no node fits,
// the plan of placement::plan_consolidation under the policy's rules, with the per-pod cooldown
// and the per-minute limits of the moves drivers reported made (moves_made, reached through the
// runner's Scheduler::moves_made). Off unless the policy enables it.
//
// Thread-safety: consolidate is const and runs under the runner's read lock; moves_made under
// its write lock.
#pragma once

#include "gapless/placement/consolidation.h"
#include "gapless/placement/stage.h"

namespace gapless::placement {

class ConsolidationStage final : public Stage {
 public:
  std::string_view name() const override { return "consolidation"; }
  bool consolidate(const StageCall& call, const Profile& profile, const ConsolidationQuery& query,
                   ConsolidationSearch* out) const override;
  // A driver evicted `plan`'s pods at now_s (never called in dry-run).
  void moves_made(const ConsolidationPlan& plan, double now_s, const ConsolidationRules& rules) {
    ledger_.record(plan, now_s, rules);
  }

 private:
  MoveLedger ledger_;
};

}  // namespace gapless::placement
