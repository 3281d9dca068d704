// The extender's HTTP front: one port, for the extender verbs (POST <prefix>/filter,
// /prioritize, /bind, /preempt) and the operational routes (GET /healthz, /readyz, /version,
// /metrics, /debug/state, POST /debug/explain). Plain HTTP, or HTTPS with an optional
// client-certificate check (mutual TLS) when a certificate and key are given.
//
// It is a door (gapless/door/door.h: one event loop, Beast's strict parser, deadlines and
// bounds, probes first; docs/front-door.md) with the extender's routes (routes.h) behind it.
//
// Extender verbs always answer HTTP 200 (kube-scheduler discards non-200 bodies); failures,
// including refused framing and bodies over the limit, travel in the "Error" field. Other routes
// use 4xx/5xx. Every refusal closes the connection.
#pragma once

#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "gapless/door/door.h"
#include "gapless/model/result.h"
#include "gapless/server/extender.h"
#include "gapless/server/metrics.h"

namespace gapless::server {

using door::default_workers;

// The door's bounds (door::DoorOptions: timeouts, head, body and answer limits, connections,
// workers, TLS, and `metrics`, where the door counts what it refused: the Extender's) and what
// the extender's routes add.
struct HttpOptions : door::DoorOptions {
  std::string url_prefix;       // "" or "/gpu"; trailing '/' ignored
  std::function<bool()> ready;  // /readyz; null = always ready
  // Test hook: runs on the worker at the start of every route handler the workers (or the probe
  // thread) run, with the request path. Lets tests hold workers busy. Null in production.
  std::function<void(const std::string& path)> before_handler;
  // /bind answered later: called on a worker with the body; `done` takes the answer (the JSON
  // Extender::bind returns), from any thread, exactly once. Null: Extender::bind, at once.
  // (The seam for Extender::bind_async; tests set it to answer from another thread.)
  std::function<void(std::string body, std::function<void(std::string answer)> done)> bind_async;
};

// Normalizes a --url-prefix value: "" stays "", "gpu/" becomes "/gpu".
std::string normalize_prefix(std::string prefix);

class Routes;

class HttpServer {
 public:
  // Never fails: invalid options or unreadable TLS files make bind() return the error.
  HttpServer(Extender& extender, HttpOptions options);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // door::Door::bind: the bound port, or why the options or the port cannot be served.
  Result<int> bind(const std::string& host, int port);
  // Binds a second listener for the kubelet and Prometheus (--probe-listen): plain HTTP (even
  // when bind()'s is HTTPS), the probe routes only (door::ProbeRoutes), with its own
  // event loop (a thread serve() runs), its own connection slots (the same limits as bind()'s,
  // counted apart) and its own threads: a flood of connections or TLS handshakes on the main
  // listener cannot keep probes here waiting. Returns the bound port. REQUIRES: before serve().
  Result<int> bind_probes(const std::string& host, int port);
  // Runs the event loop until stop() is called and the requests being handled are answered
  // (and the probe listener's, on a thread of its own, when bound); returns at once if stop()
  // came first. REQUIRES: bind() succeeded.
  void serve();
  // door::Door::stop, for both listeners.
  void stop();

  bool tls() const { return !options_.tls_cert_file.empty(); }
  // The main listener's pool (door::Door), for tests and diagnostics.
  std::size_t queued_connections() const;
  std::size_t busy_workers() const;

 private:
  Extender& extender_;
  HttpOptions options_;
  // Before the doors, which borrow them.
  std::unique_ptr<Routes> routes_;
  std::unique_ptr<door::RouteTable> probe_routes_;  // null unless bind_probes() was called
  std::unique_ptr<door::Door> door_;
  std::unique_ptr<door::Door> probe_door_;  // null unless bind_probes() succeeded
  std::atomic<bool> stop_requested_{false};
};

}  // namespace gapless::server
