// The agent's HTTP port, what the kubelet's liveness probe and Prometheus call:
// GET /healthz ("ok" while the process runs: a node without NVML is a healthy agent with
// nothing to publish), GET /readyz (always "ok"), GET /metrics (AgentMetrics) and GET /version;
// anything else 404.
//
// It is the extender's door (gapless/door/door.h, docs/front-door.md) with the probe routes
// alone (door::ProbeRoutes): one event loop, Beast's strict parser, deadlines and bounds, and
// /healthz answered by the loop itself, so idle, slow (slowloris) or oversized clients on the pod
// network cannot keep the kubelet's probe from an answer (issue 38).
//
// Ownership: borrows the metrics, which must outlive the server; owns its event loop's thread.
// Thread-safety: start and stop from one thread; requests are served concurrently.
#pragma once

#include <string>
#include <thread>

#include "gapless/agent/metrics.h"
#include "gapless/door/door.h"
#include "gapless/door/probe_routes.h"
#include "gapless/model/result.h"

namespace gapless::agent {

class StatusServer {
 public:
  // The agent's bounds: no route takes a body and no probe sends a large head; one worker
  // (/version), the loop (/healthz, /readyz) and the probe thread (/metrics) answer.
  static door::DoorOptions default_options();

  // `options`: the door's bounds (tests shorten the deadlines); its `metrics` is set to
  // `metrics`, which counts what the door refuses.
  explicit StatusServer(AgentMetrics& metrics, door::DoorOptions options = default_options());
  ~StatusServer();  // stops
  StatusServer(const StatusServer&) = delete;
  StatusServer& operator=(const StatusServer&) = delete;

  // Binds `listen` ("HOST:PORT"; port 0 picks a free one) and serves in the background.
  // Serves once: after stop(), start() binds but never answers.
  Status start(const std::string& listen);
  int port() const { return port_; }
  void stop();

 private:
  door::ProbeRoutes routes_;  // before door_, which borrows it
  door::Door door_;
  std::thread thread_;
  int port_ = 0;
};

}  // namespace gapless::agent
