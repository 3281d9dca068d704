// The byte pipe under one door connection (plain_connection.h): a plain socket, or a TLS session
// on a non-blocking socket. The door thread only ever calls the non-blocking half (handshake,
// read_now, send_now); a worker calls the waiting half (read, write), each wait bounded by the
// time it is given. One thread at a time uses a Transport (the door hands it over under a lock).
#pragma once

#include <openssl/ssl.h>
#include <poll.h>
#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <string_view>

namespace gapless::server {

class Transport {
 public:
  using Clock = std::chrono::steady_clock;
  enum class Io { kData, kAgain, kClosed };  // kAgain: nothing now, poll for events() first

  // Takes both: the socket, and the TLS session on it (null for plain HTTP). A TLS session must
  // be in accept state on a non-blocking socket.
  Transport(int sock, SSL* ssl) : sock_(sock), ssl_(ssl), handshaken_(ssl == nullptr) {}
  ~Transport() { close(); }
  Transport(const Transport&) = delete;
  Transport& operator=(const Transport&) = delete;

  int sock() const { return sock_; }
  bool tls() const { return ssl_ != nullptr; }
  bool handshaken() const { return handshaken_; }
  // What to poll for before the next non-blocking call (TLS may need to write to read).
  short events() const { return want_write_ ? POLLOUT : POLLIN; }
  // Decrypted bytes already inside the TLS session: poll() does not report them.
  bool pending() const;

  // One non-blocking step of the TLS handshake (SSL_accept). kData once it is done (also for
  // plain), kAgain while it needs the peer, kClosed when it failed (a refused client
  // certificate too).
  Io handshake();
  // Non-blocking read of at most `size` bytes into `out`; *n says how many on kData.
  Io read_now(char* out, std::size_t size, std::size_t* n);
  // Best effort, never blocks: for answers the door sends before closing.
  void send_now(std::string_view text);

  // Waits until `end` at most for data; like recv(): > 0 bytes, 0 the peer closed, -1 failed or
  // timed out.
  ssize_t read(char* out, std::size_t size, Clock::time_point end);
  // Writes some of `data`, waiting until `end` at most; like send().
  ssize_t write(const char* data, std::size_t size, Clock::time_point end);

  // Ends the TLS session (best effort close_notify) and closes the socket; idempotent.
  void close();

 private:
  // Maps an SSL_* result to Io, noting whether the session waits to write.
  Io tls_result(int ret);

  int sock_;
  SSL* ssl_;
  bool handshaken_;
  bool want_write_ = false;
};

}  // namespace gapless::server
