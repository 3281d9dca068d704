// The node agent's loop: scan the GPUs through NVML, build the topology annotation, publish it
// when it changed; between scans, wait for XID events so a critical one is published at once
// rather than at the next poll.
//
// Without NVML (no driver on this node, or --nvml-library pointing nowhere) the agent says so
// once, publishes nothing and keeps trying to load it every poll interval, silently: the GPU
// operator may install the driver after the agent started.
//
// Ownership: borrows the publisher (may be null: build annotations only) and the metrics;
// owns the NVML session. Thread-safety: one thread calls tick() or run(); `stop` may be set
// from any thread or a signal handler.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "gapless/agent/gpu_scan.h"
#include "gapless/agent/metrics.h"
#include "gapless/agent/node_publisher.h"
#include "gapless/agent/nvml_library.h"
#include "gapless/agent/xid_watch.h"

namespace gapless::agent {

struct AgentOptions {
  std::string nvml_library = kDefaultNvmlLibrary;
  std::chrono::milliseconds poll_interval = std::chrono::seconds(30);
  std::string node_label = "this node";  // names the node in messages
};

using LogSink = std::function<void(const std::string& line)>;

class Agent {
 public:
  Agent(AgentOptions options, NodePublisher* publisher, AgentMetrics& metrics, LogSink log);
  ~Agent();
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  // Loads NVML unless loaded. False when it cannot be (logged the first time only).
  bool load_nvml();
  // The reason the last load_nvml() failed; empty after a success.
  const std::string& nvml_absent_reason() const { return absent_reason_; }

  // One scan, then (with a publisher) a publish when the text changed. Returns the annotation.
  // Errors: NVML not loaded, the GPU count unreadable, an annotation that
  // k8s::node_from_topology_annotation would reject (never published), or the publish failed.
  Result<std::string> tick();

  // Called with every successful scan, before the annotation is published (the device plugin's
  // view of the GPUs and their health). Set before run().
  void on_scan(std::function<void(const NodeGpus&)> listener) { on_scan_ = std::move(listener); }
  // Called after every successful scan with the NVML session (per-pod usage, usage_report.h).
  // Set before run().
  void on_tick(std::function<void(const NvmlLibrary&)> f) { on_tick_ = std::move(f); }

  // Called with every successful scan, after on_scan and before the annotation is built: the
  // drift check (drift_monitor.h). It returns GPU UUID -> the containers really using the GPU
  // that the model does not charge for it, published as "inUseBy". Set before run().
  using InUseCheck =
      std::function<std::map<std::string, std::vector<std::string>>(const NodeGpus&)>;
  void check_in_use(InUseCheck check) { in_use_ = std::move(check); }

  // Asks run() for a tick now rather than at the next poll (any thread): e.g. to re-check drift
  // right after the device plugin handed devices out.
  void wake() { wake_ = true; }

  // MIG instances left out of every scan's result (the listener's and the annotation's): those
  // the device plugin made for records. They are the records' slices, not a layout, so the GPU
  // stays reconfigurable for the scheduler. Set before run().
  using MigFilter = std::function<bool(const GpuState&, const model::MigInstance&)>;
  void hide_mig_instances(MigFilter hide) { hide_ = std::move(hide); }

  // Ticks every poll interval until `stop`; a critical XID marks its GPU unhealthy and ticks
  // at once. Publish errors are logged and retried at the next tick.
  void run(const std::atomic<bool>& stop);

 private:
  // Counts the events; marks GPUs with critical XIDs. True when one was critical.
  bool handle_xids(const std::vector<XidEvent>& events);
  void nvml_error(const std::string& message);
  void wait_for_next_tick(const std::atomic<bool>& stop);

  AgentOptions options_;
  NodePublisher* publisher_;
  AgentMetrics& metrics_;
  LogSink log_;
  std::unique_ptr<NvmlLibrary> nvml_;
  std::unique_ptr<GpuScanner> scanner_;
  std::unique_ptr<XidWatcher> xids_;
  std::string absent_reason_;
  bool said_absent_ = false;
  std::set<std::string> logged_errors_;
  std::function<void(const NodeGpus&)> on_scan_;  // each distinct NVML failure is logged once
  MigFilter hide_;
  InUseCheck in_use_;
  std::atomic<bool> wake_{false};
  std::function<void(const NvmlLibrary&)> on_tick_;
};

}  // namespace gapless::agent
