#include "gapless/agent/agent.h"

#include <algorithm>
#include <thread>

#include "gapless/agent/topology_annotation.h"
#include "gapless/k8s/node_inventory.h"

namespace gapless::agent {

namespace {

using Clock = std::chrono::steady_clock;
// The longest a wait runs before `stop` is looked at again.
constexpr std::chrono::milliseconds kStopCheck{200};
using InUse = std::map<std::string, std::vector<std::string>>;

}  // namespace

Agent::Agent(AgentOptions options, NodePublisher* publisher, AgentMetrics& metrics, LogSink log)
    : options_(std::move(options)),
      publisher_(publisher),
      metrics_(metrics),
      log_(std::move(log)) {}

// The watcher and scanner borrow the library: destroy them first.
Agent::~Agent() {
  xids_.reset();
  scanner_.reset();
}

void Agent::nvml_error(const std::string& message) {
  metrics_.count_nvml_error();
  if (logged_errors_.insert(message).second && log_) log_("NVML: " + message);
}

bool Agent::load_nvml() {
  if (nvml_) return true;
  auto lib = NvmlLibrary::open(options_.nvml_library);
  if (!lib.ok()) {
    absent_reason_ = lib.error();
    if (!said_absent_ && log_) {
      log_("NVML not available, nothing to publish: " + absent_reason_);
    }
    said_absent_ = true;
    return false;
  }
  absent_reason_.clear();
  nvml_ = std::move(lib).value();
  auto sink = [this](const std::string& m) { nvml_error(m); };
  scanner_ = std::make_unique<GpuScanner>(*nvml_, sink);
  xids_ = std::make_unique<XidWatcher>(*nvml_, sink);
  if (said_absent_ && log_) log_("NVML loaded from " + options_.nvml_library);
  return true;
}

Result<std::string> Agent::tick() {
  if (!load_nvml()) return Error{"NVML not available: " + absent_reason_};
  auto gpus = scanner_->scan();
  if (!gpus.ok()) return Error{gpus.error()};
  if (hide_) {
    for (GpuState& g : gpus->gpus) {
      std::erase_if(g.mig_instances, [&](const model::MigInstance& i) { return hide_(g, i); });
    }
  }
  const int unhealthy = static_cast<int>(std::count_if(gpus->gpus.begin(), gpus->gpus.end(),
                                                       [](const auto& g) { return !g.healthy; }));
  metrics_.set_gpus(static_cast<int>(gpus->gpus.size()), unhealthy);
  if (on_scan_) on_scan_(*gpus);
  if (on_tick_) on_tick_(*nvml_);
  std::string text = topology_annotation(*gpus, in_use_ ? in_use_(*gpus) : InUse{});
  // The scheduler rejects a malformed annotation as a whole; never publish one (the scan is
  // built to avoid it, this is the guarantee). The Node keeps its previous value.
  if (auto parsed = k8s::node_from_topology_annotation(options_.node_label, text); !parsed.ok()) {
    return Error{"not publishing an annotation the scheduler would reject: " + parsed.error()};
  }
  if (publisher_ == nullptr) return text;
  auto sent = publisher_->publish(text);
  if (!sent.ok())
    return Error{"publishing " + std::string(kTopologyAnnotation) + ": " + sent.error()};
  if (*sent) {
    metrics_.count_patch();
    if (log_) {
      log_("published " + std::string(kTopologyAnnotation) + ": " +
           std::to_string(gpus->gpus.size()) + " GPUs, " + std::to_string(unhealthy) +
           " unhealthy");
    }
  }
  return text;
}

bool Agent::handle_xids(const std::vector<XidEvent>& events) {
  bool critical = false;
  for (const XidEvent& e : events) {
    metrics_.count_xid(e.xid);
    const bool bad = is_critical_xid(e.xid);
    if (log_) {
      log_("XID " + std::to_string(e.xid) + " on GPU " + std::to_string(e.gpu) +
           (bad ? ": critical, marking the GPU unhealthy" : ": not critical"));
    }
    if (bad && e.gpu >= 0) {
      scanner_->mark_unhealthy(e.gpu);
      critical = true;
    }
  }
  return critical;
}

void Agent::wait_for_next_tick(const std::atomic<bool>& stop) {
  const auto next = Clock::now() + options_.poll_interval;
  while (!stop.load() && Clock::now() < next) {
    if (wake_.exchange(false)) return;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(next - Clock::now());
    const auto slice = std::clamp(left, std::chrono::milliseconds(0), kStopCheck);
    if (!xids_) {
      std::this_thread::sleep_for(slice);
    } else if (handle_xids(xids_->wait(slice))) {
      return;  // publish the unhealthy GPU now
    }
  }
}

void Agent::run(const std::atomic<bool>& stop) {
  while (!stop.load()) {
    if (load_nvml()) {
      auto t = tick();
      if (!t.ok() && log_) log_(t.error());
    }
    wait_for_next_tick(stop);
  }
}

}  // namespace gapless::agent
