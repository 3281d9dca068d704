// Device-aware preemption as the runner's PostFilter stage (placement/stage.h): per node
// kube-scheduler offers, the victims whose eviction lets the pod (of pod.priority) fit there
// (placement::select_victims, with kube-scheduler's proposal for the node and the
// PodDisruptionBudgets the driver resolved). Nullopt for unknown and fenced nodes and nodes
// where no eviction of lower-priority pods is enough.
//
// Thread-safety: stateless.
#pragma once

#include "gapless/placement/stage.h"

namespace gapless::placement {

class PreemptionStage final : public Stage {
 public:
  std::string_view name() const override { return "preemption"; }
  bool post_filter(const StageCall& call, const std::vector<VictimQuery>& nodes,
                   const std::vector<DisruptionBudget>& budgets,
                   std::vector<std::optional<VictimChoice>>* out) const override;
};

}  // namespace gapless::placement
