// The front door both binaries serve HTTP through (the extender's HttpServer, the agent's
// StatusServer): one port, plain HTTP or HTTPS with an optional client-certificate check, and
// the routes of a RouteTable (route_table.h) it borrows.
//
// One Boost.Asio event loop owns every socket: it accepts, runs TLS handshakes (their
// signatures on a thread of their own, so a flood of handshakes never delays it), reads each
// request with Boost.Beast's strict parser (plus the RFC 9112 checks of head_rules.h), decodes
// chunked bodies, answers "Expect: 100-continue", and writes every answer, each step under a
// deadline. A request reaches a worker only complete; the worker hands its answer back to the
// loop (a route may also answer later, from any thread). Probes (/healthz, /readyz) are
// answered by the loop itself and /metrics by a reserved thread, so busy workers never delay
// them. A slow client costs a buffer, never a worker. docs/front-door.md describes the design
// and every bound. Every refusal closes the connection.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <thread>

#include "gapless/door/route_table.h"
#include "gapless/model/result.h"

struct ssl_ctx_st;  // OpenSSL's SSL_CTX

namespace gapless::door {

// Where the door counts what it refused (the binary's Prometheus registry).
class DoorCounters {
 public:
  // A request answered at once with an overload error; route: Route::name.
  virtual void count_overload(const std::string& route) = 0;
  // A connection refused or cut: "max_connections", "max_connections_per_peer",
  // "request_timeout", "write_timeout", "tls_handshake".
  virtual void count_connection_cut(const std::string& reason) = 0;

 protected:
  ~DoorCounters() = default;
};

// Default for --workers: twice the hardware threads, at least 4.
inline std::size_t default_workers() {
  return std::max<std::size_t>(4,
                               2 * static_cast<std::size_t>(std::thread::hardware_concurrency()));
}

// The door's bounds. The flags named are the extender's; the agent's StatusServer sets its own.
struct DoorOptions {
  std::size_t max_body_bytes = 16 * 1024 * 1024;  // full-mode NodeLists reach several MB

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

  // Where overload answers and cut connections are counted. Null: not counted. Must outlive
  // the door.
  DoorCounters* metrics = nullptr;
};

class ServerCore;

class Door {
 public:
  // The probe thread's queue: /metrics scrapes waiting beyond it are answered 503.
  static constexpr std::size_t kProbeQueue = 16;

  // Borrows `routes`, which must outlive the door. Never fails: invalid options or unreadable
  // TLS files make setup() (and bind()) say why.
  Door(RouteTable& routes, DoorOptions options);
  ~Door();  // stops
  Door(const Door&) = delete;
  Door& operator=(const Door&) = delete;

  // Why the options cannot be served, if they cannot (e.g. "--tls-cert /etc/x.pem: cannot
  // read: No such file or directory").
  const Status& setup() const { return setup_; }
  // Binds host:port; port 0 picks a free port. Returns the bound port, or why the options
  // cannot be served or the port cannot be bound.
  Result<int> bind(const std::string& host, int port);
  bool bound() const;
  // Runs the event loop until stop() is called and the requests being handled are answered;
  // returns at once if stop() came first or bind() did not succeed.
  void run();
  // Safe from any thread, also before run() starts or after it returned. Requests already
  // being handled finish and are answered; connections still waiting for a worker are closed
  // unanswered, idle ones at once.
  void stop();
  // HTTPS: reads the certificate and key files again (they were renewed) and hands the pair to
  // connections accepted from then on; open ones keep theirs. A pair that cannot be loaded, or
  // whose key does not match, leaves the served one in place and says why. Any thread.
  Status reload_tls();

  bool tls() const { return !options_.tls_cert_file.empty(); }
  // HTTPS: the served OpenSSL context (null over plain HTTP), for what the door does not set
  // itself; change it only before run(). Tests hold a handshake with a ClientHello callback.
  ssl_ctx_st* tls_context();
  // The pool's state, for tests and diagnostics: requests waiting for a worker, and workers
  // answering one.
  std::size_t queued_connections() const;
  std::size_t busy_workers() const;

 private:
  DoorOptions options_;
  Status setup_;
  std::unique_ptr<ServerCore> core_;
  std::atomic<bool> stop_requested_{false};
};

}  // namespace gapless::door
