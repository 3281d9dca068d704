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
                   .Add({})),
      drift_containers_(prometheus::BuildGauge()
                            .Name("gapless_agent_drift_containers")
                            .Help("Containers whose devices (kubelet PodResources) differ from "
                                  "their pod's allocation record, by kind, at the last check.")
                            .Register(*registry_)),
      drift_fenced_(prometheus::BuildGauge()
                        .Name("gapless_agent_drift_fenced_gpus")
                        .Help("GPUs published as in use by containers the model does not "
                              "charge for them (inUseBy): the extender does not offer them.")
                        .Register(*registry_)
                        .Add({})),
      drift_events_(prometheus::BuildCounter()
                        .Name("gapless_agent_drift_events_total")
                        .Help("GaplessDrift Events posted on pods.")
                        .Register(*registry_)
                        .Add({})),
      drift_errors_(prometheus::BuildCounter()
                        .Name("gapless_agent_drift_check_errors_total")
                        .Help("Drift checks that could not read the kubelet's PodResources or "
                              "the node's pods.")
                        .Register(*registry_)
                        .Add({})),
      overloads_(prometheus::BuildCounter()
                     .Name("gapless_agent_http_overload_total")
                     .Help("Status server requests answered 503 at once because their lane "
                           "(the probe thread or the worker) and its queue were full.")
                     .Register(*registry_)),
      connections_cut_(prometheus::BuildCounter()
                           .Name("gapless_agent_http_connections_cut_total")
                           .Help("Status server connections refused or closed before a request "
                                 "was served: over the connection limits, or a request not "
                                 "complete in time.")
                           .Register(*registry_)) {}

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

void AgentMetrics::set_drift_containers(const std::string& kind, int containers) {
  drift_containers_.Add({{"kind", kind}}).Set(containers);
}

void AgentMetrics::set_drift_fenced_gpus(int gpus) {
  drift_fenced_.Set(gpus);
}

void AgentMetrics::count_drift_event() {
  drift_events_.Increment();
}

void AgentMetrics::count_drift_check_error() {
  drift_errors_.Increment();
}

std::string AgentMetrics::serialize() const {
  std::vector<prometheus::MetricFamily> families = registry_->Collect();
  if (extra_ != nullptr) {
    for (auto& f : extra_->Collect()) families.push_back(std::move(f));
  }
  return prometheus::TextSerializer().Serialize(families);
}

void AgentMetrics::count_overload(const std::string& route) {
  overloads_.Add({{"route", route}}).Increment();
}

void AgentMetrics::count_connection_cut(const std::string& reason) {
  connections_cut_.Add({{"reason", reason}}).Increment();
}

}  // namespace gapless::agent
