#include "gapless/placement/stage_registry.h"

namespace gapless::placement {

namespace {

template <typename T>
T* add(Stages& s, std::unique_ptr<T> stage) {
  T* raw = stage.get();
  s.ordered.push_back(std::move(stage));
  return raw;
}

}  // namespace

Stages make_stages(bool /*check_host*/, const WorkloadMix* fixed_mix) {
  Stages s;
  // Filter applies the quotas' per-model limits before it withholds the drain target: a node
  // both refuse is reported for the quota, which the pod's own namespace can change.
  s.quotas = add(s, std::make_unique<QuotaStage>());
  // The drain target counts CPU and memory even behind kube-scheduler (check_host off): its
  // NodeResourcesFit only refuses a node, it never says which one a waiting pod should hold. Blind
  // to them, the stage held a node whose GPUs were free but not the cores (taken by pods that
  // never leave it) and the pod waited for nothing. The model counts every pod's requests
  // (ClusterSync::account_host_only), as Scheduler::consolidate relies on too.
  s.waiting = add(s, std::make_unique<WaitingStage>(/*check_host=*/true));
  add(s, std::make_unique<KeepBestStage>());
  add(s, std::make_unique<PreemptionStage>());
  s.consolidation = add(s, std::make_unique<ConsolidationStage>());
  s.mix = add(s, std::make_unique<LearnedMixStage>(fixed_mix));
  return s;
}

}  // namespace gapless::placement
