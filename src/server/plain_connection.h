// HTTP and HTTPS connections served by our own loop around httplib's request handling.
//
// httplib 0.11 gives each accepted connection to a pool thread, which waits (5 s keep-alive, then
// up to --read-timeout per read; over HTTPS the handshake first) for a request and reads it byte
// by byte as it arrives: idle or slow clients hold threads that others need, and its per-request
// read-ahead buffer loses pipelined requests. Here instead:
//  - The accept thread only admits a connection (or refuses it at once: --max-connections,
//    --max-connections-per-peer) and gives it to one "door" thread, which poll()s every
//    connection that has no complete request yet and reads what arrives without blocking.
//  - Over HTTPS the door also runs the TLS handshake, non-blocking (door_transport.h): it counts
//    as part of the first request, so handshake and first request must together finish within
//    --request-timeout of the accept. A refused client certificate fails the handshake there.
//  - A connection goes to the worker pool only once a whole request is buffered (head, and a
//    Content-Length body up to max_body_bytes; a chunked body, "Expect: 100-continue" or an
//    oversized Content-Length go at the end of the head, and the worker reads the rest).
//  - Every request must be complete within --request-timeout of its first byte, head and body,
//    or the door answers 408 and closes; an idle connection is closed after the keep-alive wait.
//  - After an answer the connection goes back to the door (pipelined requests are answered in
//    order, from the same buffer).
//  - The door's memory is bounded: each connection may buffer kDoorAlways bytes, and more (up
//    to kDoorBuffer) only while all connections together hold less than kDoorBudget beyond
//    that; a connection that may not buffer more goes to a worker at the end of its head.
// Parsing, routing and answering are httplib's, through its protected process_request.
#pragma once

#include <httplib.h>
#include <openssl/ssl.h>

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>

namespace gapless::server {

struct DoorLimits {
  std::chrono::steady_clock::duration request_timeout = std::chrono::seconds(10);
  std::size_t max_connections = 1024;
  std::size_t max_connections_per_peer = 256;
  std::size_t max_body_bytes = 16 * 1024 * 1024;
  // Called on the door's threads for each connection it refuses or cuts, with the reason:
  // "max_connections", "max_connections_per_peer", "request_timeout" (a request, or a TLS
  // handshake, not complete in time) or "tls_handshake" (failed). Null: not counted.
  std::function<void(const char* reason)> count_cut;
};

class Door;

// The door's memory bounds (see above); public for the README's arithmetic and tests.
constexpr std::size_t kDoorAlways = 64 * 1024;
constexpr std::size_t kDoorBuffer = 1024 * 1024;
constexpr std::size_t kDoorBudget = 64 * 1024 * 1024;

class DoorServer : public httplib::Server {
 public:
  // Plain HTTP with a null `tls`, else HTTPS with that context (owned from here on).
  explicit DoorServer(SSL_CTX* tls = nullptr);
  ~DoorServer() override;

  // Replaces new_task_queue: accepted connections go to the door, which hands connections with a
  // complete request to a queue made by `workers` (the worker pool). Call before listening.
  void serve_through(DoorLimits limits, std::function<httplib::TaskQueue*()> workers);

  // Connections open now (at the door or at a worker).
  std::size_t open_connections() const;

 private:
  friend class Door;
  // Overrides httplib's (private virtual) per-connection function. Called on the accept thread:
  // admits the socket to the door and returns at once (neither reads nor handshakes).
  bool process_and_close_socket(socket_t sock) override;
  // Answers one request read from `strm` (httplib's parsing and routing); false when the
  // connection must end. Runs on a pool thread.
  bool serve_request(httplib::Stream& strm, bool last, bool* closed);
  bool stopping() const { return svr_sock_ == INVALID_SOCKET; }

  std::shared_ptr<Door> door_;
  std::unique_ptr<SSL_CTX, void (*)(SSL_CTX*)> tls_;
};

}  // namespace gapless::server
