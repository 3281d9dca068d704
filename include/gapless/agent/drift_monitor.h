// Runs the drift check (drift.h) against the live node: reads the kubelet's PodResources, then
// this node's pods from the API server, compares, and reports what differs:
//   - a Warning Event `GaplessDrift` on the pod, once per finding (not every check; a finding
//     that goes away and comes back is reported again; a restarted agent reports again once);
//   - the metrics gapless_agent_drift_containers{kind}, gapless_agent_drift_fenced_gpus,
//     gapless_agent_drift_events_total, gapless_agent_drift_check_errors_total;
//   - the fences: per GPU UUID, the containers really using it that the model does not charge
//     for it. The agent publishes them as "inUseBy" in gapless.io/gpu-topology, and the
//     extender stops offering those GPUs until the containers end.
// The check is stateless apart from the Event bookkeeping: after a kubelet restart PodResources
// answers from the kubelet's checkpoint, so the same assignment is compared again.
//
// Ownership: borrows the API transport and the metrics (must outlive the monitor).
// Thread-safety: check() from one thread at a time; fences() from any thread.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "gapless/agent/drift.h"
#include "gapless/agent/metrics.h"
#include "gapless/agent/pod_resources.h"
#include "gapless/k8s/api_client.h"

namespace gapless::agent {

inline constexpr const char* kDriftEventReason = "GaplessDrift";

// GPU UUID -> the containers ("ns/pod/container") using it that the model does not charge.
using GpuFences = std::map<std::string, std::vector<std::string>>;

struct DriftMonitorOptions {
  std::string node_name;
  std::string pod_resources_socket = kPodResourcesSocket;
  std::chrono::milliseconds deadline = std::chrono::seconds(5);  // per PodResources call
};

class DriftMonitor {
 public:
  DriftMonitor(DriftMonitorOptions options, k8s::ApiTransport& api, AgentMetrics& metrics,
               std::function<void(const std::string&)> log);

  // One check. `uuid_by_index`: the node's GPUs (records name MIG GPUs by index). Returns the
  // fences to publish. Without the PodResources socket the check is skipped (said once) and the
  // last fences stay; so do they when the kubelet or the API server cannot be read (an error,
  // counted): a fence is lifted only by a check that saw the drift gone.
  Result<GpuFences> check(const std::map<int, std::string>& uuid_by_index);

  GpuFences fences() const;                    // the last fences check() returned
  std::vector<DriftFinding> findings() const;  // the last successful check's

 private:
  Result<DriftReport> compare(const std::map<int, std::string>& uuid_by_index);
  void report(const DriftReport& report);
  bool post_event(const DriftFinding& f);
  void say_once(const std::string& line);

  DriftMonitorOptions options_;
  k8s::ApiTransport& api_;
  AgentMetrics& metrics_;
  std::function<void(const std::string&)> log_;
  PodResourcesClient kubelet_;
  std::set<std::string> reported_;  // keys of findings whose Event was posted
  std::string last_said_;           // the last skip or error line, said once until it changes
  mutable std::mutex mu_;           // fences_, findings_
  GpuFences fences_;
  std::vector<DriftFinding> findings_;
};

}  // namespace gapless::agent
