// The extender's HTTP front: one port, for the extender verbs (POST <prefix>/filter,
// /prioritize, /bind, /preempt) and the operational routes (GET /healthz, /readyz, /version,
// /metrics, /debug/state, POST /debug/explain). Plain HTTP, or HTTPS with an optional
// client-certificate check (mutual TLS) when a certificate and key are given.
//
// One Boost.Asio event loop owns every socket: it accepts, runs TLS handshakes, reads each
// request with Boost.Beast's strict parser (plus the RFC 9112 checks of head_rules.h), decodes
// chunked bodies, answers "Expect: 100-continue", and writes every answer, each step under a
// deadline. A request reaches a worker only complete; the worker hands its answer back to the
// loop (a route may also answer later, from any thread: deferred answers, /bind). A slow client
// costs a buffer, never a worker. docs/front-door.md describes the design and every bound.
//
// Extender verbs always answer HTTP 200 (kube-scheduler discards non-200 bodies); failures,
// including refused framing and bodies over the limit, travel in the "Error" field. Other routes
// use 4xx/5xx. Every refusal closes the connection.
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

namespace gapless::server {

// Default for --workers: twice the hardware threads, at least 4.
inline std::size_t default_workers() {
  return std::max<std::size_t>(4,
                               2 * static_cast<std::size_t>(std::thread::hardware_concurrency()));
}

struct HttpOptions {
  // Who a listener serves. kAll: every route (--listen). kProbes: the kubelet and Prometheus
  // (--probe-listen): only GET /healthz, /readyz, /version and /metrics; anything else is 404,
  // never a verb, /debug/* or /ui/*.
  enum class Audience { kAll, kProbes };
  Audience audience = Audience::kAll;
  std::string url_prefix;                         // "" or "/gpu"; trailing '/' ignored
  std::size_t max_body_bytes = 16 * 1024 * 1024;  // full-mode NodeLists reach several MB
  std::function<bool()> ready;                    // /readyz; null = always ready

  // --read-timeout: the longest wait for the next byte of a request, and for the first byte of
  // the next request on a kept connection (then closed quietly). --write-timeout: the longest
  // one whole answer may take to be written (a client not reading is then cut). Both > 0.
  std::chrono::seconds read_timeout{30};
  std::chrono::seconds write_timeout{30};
  // Head bounds (--max-header-bytes, --max-headers): the request line and fields together, and
  // the number of fields. Beyond, 431 (verbs: 200 with an Error) and close.
  std::size_t max_header_bytes = 64 * 1024;
  std::size_t max_headers = 100;
  // The largest answer a route may hand to the loop (--max-answer-bytes): a larger one becomes
  // an Error (and /debug/explain refuses early when its answer would pass it).
  std::size_t max_answer_bytes = 16 * 1024 * 1024;
  // How long a deferred answer (/bind) may take (--deferred-timeout): then an Error, and close.
  std::chrono::seconds deferred_timeout{30};
  // Connections kept above --max-connections (and above --max-connections-per-peer) for the
  // probe routes only (--probe-connections): one of them may ask /healthz, /readyz or /metrics;
  // any other request on it gets 503 and is closed. 0: none.
  std::size_t probe_connections = 16;
  // Workers (--workers, >= 1) and requests that may wait for a busy pool on top of the idle
  // workers (--max-queue, >= 0). A connection holds a worker only while a request of it is
  // answered.
  std::size_t workers = default_workers();
  std::size_t max_queue = 64;

  // A request's head and body must arrive within request_timeout of its first byte
  // (--request-timeout, > 0), else 408 and close; over HTTPS the handshake must end within
  // request_timeout of the accept, else close. At most max_connections are open
  // (--max-connections, >= 1), at most max_connections_per_peer from one peer address
  // (--max-connections-per-peer, >= 1), plus probe_connections for probes; beyond, a new
  // connection gets a best-effort 503 (HTTPS: nothing, no handshake) and is closed at once.
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

class ServerCore;

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
  // Binds a second listener for the kubelet and Prometheus (--probe-listen): plain HTTP (even
  // when bind()'s is HTTPS), the probe routes only (HttpOptions::Audience::kProbes), with its own
  // event loop (a thread serve() runs), its own connection slots (the same limits as bind()'s,
  // counted apart) and its own threads: a flood of connections or TLS handshakes on the main
  // listener cannot keep probes here waiting. Returns the bound port. REQUIRES: before serve().
  Result<int> bind_probes(const std::string& host, int port);
  // Runs the event loop until stop() is called and the requests being handled are answered
  // (and the probe listener's, on a thread of its own, when bound); returns at once if stop()
  // came first. REQUIRES: bind() succeeded.
  void serve();
  // Safe from any thread, also before serve() starts or after it returned. Requests already
  // being handled finish and are answered; connections still waiting for a worker are closed
  // unanswered, idle ones at once.
  void stop();

  bool tls() const { return !options_.tls_cert_file.empty(); }
  // The pool's state, for tests and diagnostics: requests waiting for a worker, and workers
  // answering one.
  std::size_t queued_connections() const;
  std::size_t busy_workers() const;

 private:
  Extender& extender_;
  HttpOptions options_;
  HttpOptions probe_options_;  // options_ for the probe listener (bind_probes)
  Status setup_;               // why the options cannot be served, if they cannot
  std::unique_ptr<ServerCore> core_;
  std::unique_ptr<ServerCore> probe_core_;  // null unless bind_probes() succeeded
  std::atomic<bool> stop_requested_{false};
};

}  // namespace gapless::server
