#include "gapless/agent/drift_monitor.h"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "gapless/k8s/json_fields.h"
#include "gapless/k8s/pod_api.h"

namespace gapless::agent {

using nlohmann::json;

DriftMonitor::DriftMonitor(DriftMonitorOptions options, k8s::ApiTransport& api,
                           AgentMetrics& metrics, std::function<void(const std::string&)> log)
    : options_(std::move(options)),
      api_(api),
      metrics_(metrics),
      log_(std::move(log)),
      kubelet_(options_.pod_resources_socket, options_.deadline) {}

void DriftMonitor::say_once(const std::string& line) {
  if (line == last_said_) return;
  last_said_ = line;
  if (log_) log_("drift check: " + line);
}

Result<DriftReport> DriftMonitor::compare(const std::map<int, std::string>& uuid_by_index) {
  // The kubelet first: every pod it lists is then in the API list unless it was deleted.
  auto assigned = kubelet_.list();
  if (!assigned.ok()) return Error{assigned.error()};
  auto listed = k8s::list_node_pods(api_, options_.node_name);
  if (!listed.ok()) return Error{listed.error()};
  const json& pods = *listed;
  if (!pods.is_object() || !pods.contains("items")) {
    return Error{"listing this node's pods: the answer is no pod list"};
  }
  return find_drift(pods, options_.node_name, *assigned, uuid_by_index);
}

Result<GpuFences> DriftMonitor::check(const std::map<int, std::string>& uuid_by_index) {
  std::error_code ec;
  if (!std::filesystem::exists(options_.pod_resources_socket, ec)) {
    say_once("no PodResources socket at " + options_.pod_resources_socket +
             ", skipped until it appears");
    return fences();
  }
  auto found = compare(uuid_by_index);
  if (!found.ok()) {
    metrics_.count_drift_check_error();
    say_once(found.error() + " (fences kept; retried next scan)");
    return Error{"drift check: " + found.error()};
  }
  last_said_.clear();  // working again: a later failure is said again
  report(*found);
  std::lock_guard lock(mu_);
  fences_ = found->fenced;
  findings_ = found->findings;
  return fences_;
}

void DriftMonitor::report(const DriftReport& report) {
  std::map<std::string, int> by_kind;
  for (DriftKind k : kAllDriftKinds) by_kind[std::string(to_string(k))] = 0;
  std::set<std::string> now;
  for (const DriftFinding& f : report.findings) {
    ++by_kind[std::string(to_string(f.kind))];
    const std::string key = f.key();
    now.insert(key);
    if (reported_.count(key) != 0) continue;
    if (log_) log_("drift: pod " + f.pod_ns + "/" + f.pod_name + ": " + f.message);
    // A pod the API server does not list has no object to hang an Event on.
    if (f.kind == DriftKind::kUnknownPod || post_event(f)) reported_.insert(key);
  }
  // Forget findings that are gone, so one that comes back is reported again.
  std::erase_if(reported_, [&](const std::string& k) { return now.count(k) == 0; });
  for (const auto& [kind, n] : by_kind) metrics_.set_drift_containers(kind, n);
  metrics_.set_drift_fenced_gpus(static_cast<int>(report.fenced.size()));
}

bool DriftMonitor::post_event(const DriftFinding& f) {
  const std::string failed = k8s::post_pod_event(
      api_, k8s::PodEvent{.ns = f.pod_ns,
                          .name = f.pod_name,
                          .uid = f.pod_uid,
                          .field_path = "spec.containers{" + f.container + "}",
                          .reason = std::string(kDriftEventReason),
                          .message = std::string(to_string(f.kind)) + ": " + f.message,
                          .component = "gapless-agent",
                          .host = options_.node_name});
  if (!failed.empty()) {
    if (log_) {
      log_("drift: posting the Event on pod " + f.pod_ns + "/" + f.pod_name + " failed: " + failed +
           " (retried next check)");
    }
    return false;
  }
  metrics_.count_drift_event();
  return true;
}

GpuFences DriftMonitor::fences() const {
  std::lock_guard lock(mu_);
  return fences_;
}

std::vector<DriftFinding> DriftMonitor::findings() const {
  std::lock_guard lock(mu_);
  return findings_;
}

}  // namespace gapless::agent
