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

Stages make_stages(bool check_host, const WorkloadMix* fixed_mix) {
  Stages s;
  // Filter applies the quotas' per-model limits before it withholds the drain target: a node
  // both refuse is reported for the quota, which the pod's own namespace can change.
  s.quotas = add(s, std::make_unique<QuotaStage>());
  s.waiting = add(s, std::make_unique<WaitingStage>(check_host));
  add(s, std::make_unique<KeepBestStage>());
  add(s, std::make_unique<PreemptionStage>());
  s.consolidation = add(s, std::make_unique<ConsolidationStage>());
  s.mix = add(s, std::make_unique<LearnedMixStage>(fixed_mix));
  return s;
}

}  // namespace gapless::placement
