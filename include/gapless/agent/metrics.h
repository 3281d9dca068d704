// The agent's Prometheus metrics (prometheus-cpp core), served on GET /metrics by
// StatusServer:
//   gapless_agent_gpus                      GPUs NVML reports on this node
//   gapless_agent_gpus_unhealthy            of which unhealthy (critical XID, not answering, ...)
//   gapless_agent_xid_errors_total{xid}     XID events seen, critical or not
//   gapless_agent_nvml_errors_total         NVML calls that failed unexpectedly
//   gapless_agent_annotation_patches_total  accepted PATCHes of the topology annotation
//   gapless_agent_drift_containers{kind}    containers whose devices differ from their record,
//                                           by kind (drift.h), at the last drift check
//   gapless_agent_drift_fenced_gpus         GPUs published as in use by containers the model
//                                           does not charge for them
//   gapless_agent_drift_events_total        GaplessDrift Events posted
//   gapless_agent_drift_check_errors_total  drift checks that could not read the kubelet or API
//   gapless_agent_http_overload_total{route}          status server requests answered 503 at
//                                                     once (door.h: its lanes were full)
//   gapless_agent_http_connections_cut_total{reason}  status server connections refused or cut
//                                                     (door.h: limits, deadlines)
// Thread-safe: prometheus-cpp metrics are atomic.
#pragma once

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include <memory>
#include <string>

#include "gapless/door/door.h"

namespace gapless::agent {

class AgentMetrics : public door::DoorCounters {
 public:
  AgentMetrics();
  AgentMetrics(const AgentMetrics&) = delete;
  AgentMetrics& operator=(const AgentMetrics&) = delete;

  void set_gpus(int total, int unhealthy);
  void count_xid(unsigned long long xid);
  void count_nvml_error();
  void count_patch();
  void set_drift_containers(const std::string& kind, int containers);
  void set_drift_fenced_gpus(int gpus);
  void count_drift_event();
  void count_drift_check_error();
  // What the status server's door refused (door::DoorCounters).
  void count_overload(const std::string& route) override;
  void count_connection_cut(const std::string& reason) override;

  std::string serialize() const;  // text exposition format
  // Also serve what `extra` collects (usage_report.h); it must outlive this. Set before serving.
  void also_serve(const prometheus::Collectable* extra) { extra_ = extra; }

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Gauge& gpus_;
  prometheus::Gauge& unhealthy_;
  prometheus::Family<prometheus::Counter>& xids_;
  prometheus::Counter& nvml_errors_;
  prometheus::Counter& patches_;
  prometheus::Family<prometheus::Gauge>& drift_containers_;
  prometheus::Gauge& drift_fenced_;
  prometheus::Counter& drift_events_;
  prometheus::Counter& drift_errors_;
  prometheus::Family<prometheus::Counter>& overloads_;
  prometheus::Family<prometheus::Counter>& connections_cut_;
  const prometheus::Collectable* extra_ = nullptr;
};

}  // namespace gapless::agent
