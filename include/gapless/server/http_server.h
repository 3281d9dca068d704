// The extender's HTTP front: one cpp-httplib server, one port, for the extender verbs
// (POST <prefix>/filter, /prioritize, /bind, /preempt) and the operational routes
// (GET /healthz, /readyz, /version, /metrics, /debug/state). Plain HTTP, or HTTPS with an
// optional client-certificate check (mutual TLS) when a certificate and key are given.
//
// Extender verbs always answer HTTP 200 (kube-scheduler discards non-200 bodies); failures,
// including bodies over the size limit, travel in the "Error" field. Other routes use 4xx.
// Only the verbs read a request body, as raw JSON whatever its Content-Type, and never more than
// max_body_bytes of it (chunked too). Ambiguous framing (two Content-Lengths, Content-Length with
// Transfer-Encoding) is refused before any body is read; every refusal or error answer closes the
// connection, since part of the request may be unread.
//
// Requests are answered by a bounded pool: `workers` threads, and at most `max_queue` requests
// waiting for one. A connection reaches the pool only once a request has fully arrived, over
// HTTPS after a handshake the door ran (src/server/plain_connection.h). One that finds the queue
// full is not queued: a small overflow lane answers it at once. /healthz and /readyz are answered
// normally there, extender verbs get HTTP 200 with {"Error":"overloaded: ..."}, other routes 503;
// each such answer is counted in gapless_http_overload_total{route}, and closes its connection.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "gapless/model/result.h"
#include "gapless/server/extender.h"
#include "gapless/server/metrics.h"

namespace httplib {
class Server;
}

namespace gapless::server {

// Default for --workers: twice the hardware threads, at least 4.
inline std::size_t default_workers() {
  return std::max<std::size_t>(4,
                               2 * static_cast<std::size_t>(std::thread::hardware_concurrency()));
}

struct HttpOptions {
  std::string url_prefix;                         // "" or "/gpu"; trailing '/' ignored
  std::size_t max_body_bytes = 16 * 1024 * 1024;  // full-mode NodeLists reach several MB
  std::function<bool()> ready;                    // /readyz; null = always ready

  // Socket timeouts of one read or write (also each wait of the TLS handshake): --read-timeout,
  // --write-timeout. Both must be positive.
  std::chrono::seconds read_timeout{30};
  std::chrono::seconds write_timeout{30};
  // Workers (--workers, >= 1) and requests that may wait for a busy pool on top of the idle
  // workers (--max-queue, >= 0). A connection holds a worker only while a request of it is
  // answered.
  std::size_t workers = default_workers();
  std::size_t max_queue = 64;

  // HTTP and HTTPS (see src/server/plain_connection.h): a request's head and body must arrive
  // within request_timeout of its first byte (--request-timeout, > 0), else 408 and close; over
  // HTTPS the handshake and first request within request_timeout of the accept, else close.
  // Connections waiting for a request hold no worker. At most max_connections are open
  // (--max-connections, >= 1), at most max_connections_per_peer from one peer address
  // (--max-connections-per-peer, >= 1); beyond, a new connection gets a best-effort 503 (HTTPS:
  // nothing, no handshake) and is closed at once by the accept thread.
  std::chrono::seconds request_timeout{10};
  std::size_t max_connections = 1024;
  std::size_t max_connections_per_peer = 256;

  // HTTPS: a PEM certificate (chain) and its private key (--tls-cert, --tls-key), both or neither.
  // With client_ca_file (--client-ca, needs both), clients must present a certificate that
  // this PEM CA bundle verifies, or the handshake fails.
  std::string tls_cert_file;
  std::string tls_key_file;
  std::string client_ca_file;

  // Where overload answers are counted; the registry GET /metrics serves (the Extender's).
  // Null: not counted. Must outlive the server.
  Metrics* metrics = nullptr;
  // Test hook: runs on the worker at the start of every route handler, with the request path
  // (never in the overflow lane). Lets tests hold workers busy. Null in production.
  std::function<void(const std::string& path)> before_handler;
};

// Normalizes a --url-prefix value: "" stays "", "gpu/" becomes "/gpu".
std::string normalize_prefix(std::string prefix);

class ConnectionPool;
class BodyBudget;

class HttpServer {
 public:
  // Never fails: invalid options or unreadable TLS files make bind() return the error.
  HttpServer(Extender& extender, HttpOptions options);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds host:port; port 0 picks a free port. Returns the bound port, or why the options
  // cannot be served (e.g. "--tls-cert /etc/x.pem: cannot read: No such file or directory")
  // or the port cannot be bound.
  Result<int> bind(const std::string& host, int port);
  // Serves until stop() is called; returns at once if stop() came first. REQUIRES: bind()
  // succeeded.
  void serve();
  // Safe from any thread, also before serve() starts or after it returned. Requests already
  // being handled finish; connections still waiting for a worker are closed unanswered.
  void stop();

  bool tls() const { return !options_.tls_cert_file.empty(); }
  // The pool's state, for tests and diagnostics: connections waiting for a worker, and workers
  // serving a connection.
  std::size_t queued_connections() const;
  std::size_t busy_workers() const;

 private:
  void install_routes();

  Extender& extender_;
  HttpOptions options_;
  Status setup_;  // why the options cannot be served, if they cannot
  std::unique_ptr<ConnectionPool> pool_;
  std::unique_ptr<BodyBudget> body_budget_;  // large bodies handled at once (body_budget.h)
  std::unique_ptr<httplib::Server> server_;
  // httplib ignores stop() until its accept loop runs; these make an early stop() stick.
  std::atomic<bool> stop_requested_{false};
  std::atomic<bool> serve_entered_{false};
  std::atomic<bool> serve_returned_{false};
};

}  // namespace gapless::server
