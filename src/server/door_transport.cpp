#include "door_transport.h"

#include <openssl/err.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>

namespace gapless::server {

namespace {

// Waits until `end` at most for `events` on `sock`; EINTR restarts the wait with the time left.
bool wait_until(int sock, short events, Transport::Clock::time_point end) {
  for (;;) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(end - Transport::Clock::now());
    pollfd p{sock, events, 0};
    const int n = ::poll(&p, 1, static_cast<int>(std::max<std::int64_t>(left.count(), 0)));
    if (n > 0) return true;
    if (n == 0 || errno != EINTR) return false;
  }
}

int clamp_int(std::size_t n) {
  return static_cast<int>(std::min<std::size_t>(n, INT_MAX));
}

}  // namespace

bool Transport::pending() const {
  return ssl_ != nullptr && SSL_pending(ssl_) > 0;
}

Transport::Io Transport::tls_result(int ret) {
  if (ret > 0) {
    want_write_ = false;
    return Io::kData;
  }
  switch (SSL_get_error(ssl_, ret)) {
    case SSL_ERROR_WANT_READ:
      want_write_ = false;
      return Io::kAgain;
    case SSL_ERROR_WANT_WRITE:
      want_write_ = true;
      return Io::kAgain;
    default:  // a clean close_notify, a failed handshake, a broken socket
      ERR_clear_error();
      return Io::kClosed;
  }
}

Transport::Io Transport::handshake() {
  if (handshaken_) return Io::kData;
  ERR_clear_error();
  const Io io = tls_result(SSL_accept(ssl_));
  handshaken_ = io == Io::kData;
  return io;
}

Transport::Io Transport::read_now(char* out, std::size_t size, std::size_t* n) {
  *n = 0;
  if (ssl_ == nullptr) {
    const ssize_t got = ::recv(sock_, out, size, MSG_DONTWAIT);
    if (got > 0) *n = static_cast<std::size_t>(got);
    if (got > 0) return Io::kData;
    if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return Io::kAgain;
    return Io::kClosed;
  }
  ERR_clear_error();
  const int got = SSL_read(ssl_, out, clamp_int(size));
  const Io io = tls_result(got);
  if (io == Io::kData) *n = static_cast<std::size_t>(got);
  return io;
}

void Transport::send_now(std::string_view text) {
  if (ssl_ == nullptr) {
    [[maybe_unused]] const ssize_t n =
        ::send(sock_, text.data(), text.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    return;
  }
  ERR_clear_error();
  if (handshaken_) SSL_write(ssl_, text.data(), clamp_int(text.size()));  // the socket never blocks
  ERR_clear_error();
}

ssize_t Transport::read(char* out, std::size_t size, Clock::time_point end) {
  if (ssl_ == nullptr) {
    if (!wait_until(sock_, POLLIN, end)) return -1;
    return ::recv(sock_, out, size, 0);
  }
  for (;;) {
    ERR_clear_error();
    const int got = SSL_read(ssl_, out, clamp_int(size));
    const Io io = tls_result(got);
    if (io == Io::kData) return got;
    if (io == Io::kClosed) return SSL_get_error(ssl_, got) == SSL_ERROR_ZERO_RETURN ? 0 : -1;
    if (!wait_until(sock_, events(), end)) return -1;
  }
}

ssize_t Transport::write(const char* data, std::size_t size, Clock::time_point end) {
  if (ssl_ == nullptr) {
    if (!wait_until(sock_, POLLOUT, end)) return -1;
    return ::send(sock_, data, size, MSG_NOSIGNAL);
  }
  for (;;) {
    // A retry after WANT_WRITE repeats the same call, as OpenSSL requires.
    ERR_clear_error();
    const int put = SSL_write(ssl_, data, clamp_int(size));
    const Io io = tls_result(put);
    if (io == Io::kData) return put;
    if (io == Io::kClosed) return -1;
    if (!wait_until(sock_, events(), end)) return -1;
  }
}

void Transport::close() {
  if (sock_ < 0) return;
  if (ssl_ != nullptr) {
    if (handshaken_) SSL_shutdown(ssl_);  // one non-blocking try at close_notify
    SSL_free(ssl_);
    ssl_ = nullptr;
    ERR_clear_error();
  }
  ::shutdown(sock_, SHUT_RDWR);
  ::close(sock_);
  sock_ = -1;
}

}  // namespace gapless::server
