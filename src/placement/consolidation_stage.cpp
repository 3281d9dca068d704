#include "gapless/placement/consolidation_stage.h"

namespace gapless::placement {

bool ConsolidationStage::consolidate(const StageCall& call, const Profile& profile,
                                     const ConsolidationQuery& query,
                                     ConsolidationSearch* out) const {
  *out = {};
  if (!query.rules.enabled) return true;
  ConsolidationQuery q = query;
  q.may_move = [&](const model::Allocation& a) {
    return !ledger_.cooling_down(a.pod_uid, q.now_s, q.rules) &&
           (!query.may_move || query.may_move(a));
  };
  q.within_limits = [&](const std::vector<const model::Allocation*>& pods) {
    return ledger_.allows(pods, q.now_s, q.rules) &&
           (!query.within_limits || query.within_limits(pods));
  };
  *out = plan_consolidation(call.cluster, call.req, call.pod.priority, profile, q);
  return true;
}

}  // namespace gapless::placement
