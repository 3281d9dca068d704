// The probe routes alone, for a listener that serves the kubelet and Prometheus and nothing else
// (the agent's StatusServer, the extender's --probe-listen) and inside the extender's full table:
//   GET /healthz  200 "ok" while the process runs (the loop answers it, never queued)
//   GET /readyz   200 "ok", or 503 "not ready" while `ready` says so (the loop answers it)
//   GET /metrics  the Prometheus text `metrics` returns (the door's reserved probe thread)
//   GET /version  {"name": name, "version": GAPLESS_VERSION} (a worker)
// Anything else: 404. No route takes a body.
#pragma once

#include <functional>
#include <string>

#include "gapless/door/door.h"
#include "gapless/door/route_table.h"

namespace gapless::door {

class ProbeRoutes : public RouteTable {
 public:
  // `metrics`: the exposition text, called on the probe thread (thread-safe). `ready`: null
  // means always ready. `counters` (may be null) counts overload answers; it must outlive this.
  ProbeRoutes(std::string name, std::function<std::string()> metrics,
              std::function<bool()> ready = nullptr, DoorCounters* counters = nullptr);

  Route find(const std::string& method, const std::string& path) const override;
  Answer answer_now(const Route& route) const override;
  void handle(const Route& route, Request request, Reply reply) override;
  Answer refusal(const Route& route, int status, const std::string& why) const override;
  Answer overloaded(const Route& route) const override;

 private:
  const std::string name_;
  const std::function<std::string()> metrics_;
  const std::function<bool()> ready_;
  DoorCounters* const counters_;
};

}  // namespace gapless::door
