#include "gapless/agent/metrics.h"

#include <prometheus/text_serializer.h>

namespace gapless::agent {

AgentMetrics::AgentMetrics()
    : registry_(std::make_shared<prometheus::Registry>()),
      gpus_(prometheus::BuildGauge()
                .Name("gapless_agent_gpus")
                .Help("GPUs NVML reports on this node.")
                .Register(*registry_)
                .Add({})),
      unhealthy_(
          prometheus::BuildGauge()
              .Name("gapless_agent_gpus_unhealthy")
              .Help("GPUs published as unhealthy (critical XID, not answering, unknown MIG).")
              .Register(*registry_)
              .Add({})),
      xids_(prometheus::BuildCounter()
                .Name("gapless_agent_xid_errors_total")
                .Help("XID events by XID number, critical or not.")
                .Register(*registry_)),
      nvml_errors_(prometheus::BuildCounter()
                       .Name("gapless_agent_nvml_errors_total")
                       .Help("NVML calls that failed unexpectedly.")
                       .Register(*registry_)
                       .Add({})),
      patches_(prometheus::BuildCounter()
                   .Name("gapless_agent_annotation_patches_total")
                   .Help("Accepted PATCHes of the gapless.io/gpu-topology annotation.")
                   .Register(*registry_)
                   .Add({})) {}

void AgentMetrics::set_gpus(int total, int unhealthy) {
  gpus_.Set(total);
  unhealthy_.Set(unhealthy);
}

void AgentMetrics::count_xid(unsigned long long xid) {
  xids_.Add({{"xid", std::to_string(xid)}}).Increment();
}

void AgentMetrics::count_nvml_error() {
  nvml_errors_.Increment();
}

void AgentMetrics::count_patch() {
  patches_.Increment();
}

std::string AgentMetrics::serialize() const {
  std::vector<prometheus::MetricFamily> families = registry_->Collect();
  if (extra_ != nullptr) {
    for (auto& f : extra_->Collect()) families.push_back(std::move(f));
  }
  return prometheus::TextSerializer().Serialize(families);
}

}  // namespace gapless::agent
