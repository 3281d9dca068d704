// The one place that knows every stage of the runner (placement/stage.h) and their order.
// Adding a stage: its own header and source, one line in make_stages (stage_registry.cpp), and
// it runs at every extension point it overrides; the runner does not change.
#pragma once

#include <memory>
#include <vector>

#include "gapless/placement/consolidation_stage.h"
#include "gapless/placement/keep_best_stage.h"
#include "gapless/placement/learned_mix_stage.h"
#include "gapless/placement/preemption_stage.h"
#include "gapless/placement/quota_stage.h"
#include "gapless/placement/stage.h"
#include "gapless/placement/waiting_stage.h"

namespace gapless::placement {

struct Stages {
  // Every stage, in the order each extension point runs them.
  std::vector<std::unique_ptr<Stage>> ordered;
  // The stages whose own calls the runner's API offers (namespaces, waiting pods, the mix).
  QuotaStage* quotas = nullptr;
  WaitingStage* waiting = nullptr;
  LearnedMixStage* mix = nullptr;
  ConsolidationStage* consolidation = nullptr;
};

// `check_host`, `fixed_mix`: SchedulerOptions' (no stage reads check_host: the waiting stage
// counts CPU and memory either way).
Stages make_stages(bool check_host, const WorkloadMix* fixed_mix);

}  // namespace gapless::placement
