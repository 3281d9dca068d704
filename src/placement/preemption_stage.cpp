#include "gapless/placement/preemption_stage.h"

#include <unordered_map>

namespace gapless::placement {

bool PreemptionStage::post_filter(const StageCall& call, const std::vector<VictimQuery>& nodes,
                                  const std::vector<DisruptionBudget>& budgets,
                                  std::vector<std::optional<VictimChoice>>* out) const {
  // One pass over the allocations for all the asked nodes (a preempt call names up to 100).
  std::unordered_map<std::string, std::vector<const model::Allocation*>> on_node;
  for (const VictimQuery& q : nodes) on_node.try_emplace(q.node);
  for (const model::Allocation* a : call.cluster.allocations()) {
    if (auto it = on_node.find(a->node); it != on_node.end()) it->second.push_back(a);
  }
  out->clear();
  out->reserve(nodes.size());
  for (const VictimQuery& q : nodes) {
    const model::Node* node = call.cluster.find_node(q.node);
    out->push_back(node == nullptr ? std::nullopt
                                   : select_victims(*node, on_node[q.node], call.req,
                                                    call.pod.priority, q.proposed, budgets));
  }
  return true;
}

}  // namespace gapless::placement
