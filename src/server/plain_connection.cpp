#include "plain_connection.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>

namespace gapless::server {

namespace {

using Clock = std::chrono::steady_clock;

// Waits up to `timeout` for `events` on `sock`; EINTR restarts the wait with the time left.
bool wait_for(int sock, short events, Clock::duration timeout) {
  const auto end = Clock::now() + timeout;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now());
    pollfd p{sock, events, 0};
    const int n = ::poll(&p, 1, static_cast<int>(std::max<std::int64_t>(left.count(), 0)));
    if (n > 0) return true;
    if (n == 0 || errno != EINTR) return false;
  }
}

void address_of(int sock, bool peer, std::string& ip, int& port) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  auto* sa = reinterpret_cast<sockaddr*>(&addr);
  if ((peer ? ::getpeername(sock, sa, &len) : ::getsockname(sock, sa, &len)) != 0) return;
  std::array<char, INET6_ADDRSTRLEN> text{};
  if (addr.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<sockaddr_in*>(&addr);
    ::inet_ntop(AF_INET, &in->sin_addr, text.data(), text.size());
    port = ntohs(in->sin_port);
  } else if (addr.ss_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<sockaddr_in6*>(&addr);
    ::inet_ntop(AF_INET6, &in6->sin6_addr, text.data(), text.size());
    port = ntohs(in6->sin6_port);
  }
  ip = text.data();
}

// One connection's socket, with a read-ahead buffer that lives as long as the connection.
// Each read or write waits at most its timeout, as httplib's own stream does.
class BufferedSocketStream : public httplib::Stream {
 public:
  BufferedSocketStream(int sock, Clock::duration read_timeout, Clock::duration write_timeout)
      : sock_(sock), read_timeout_(read_timeout), write_timeout_(write_timeout) {}

  bool is_readable() const override {
    return begin_ < end_ || wait_for(sock_, POLLIN, read_timeout_);
  }
  bool is_writable() const override { return wait_for(sock_, POLLOUT, write_timeout_); }

  ssize_t read(char* ptr, size_t size) override {
    if (begin_ == end_) {
      if (!wait_for(sock_, POLLIN, read_timeout_)) return -1;
      const ssize_t n = ::recv(sock_, buf_.data(), buf_.size(), 0);
      if (n <= 0) return n;  // 0: the peer closed
      begin_ = 0;
      end_ = static_cast<std::size_t>(n);
    }
    const std::size_t n = std::min(size, end_ - begin_);
    std::memcpy(ptr, buf_.data() + begin_, n);
    begin_ += n;
    return static_cast<ssize_t>(n);
  }

  ssize_t write(const char* ptr, size_t size) override {
    if (!is_writable()) return -1;
    return ::send(sock_, ptr, size, MSG_NOSIGNAL);
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    address_of(sock_, true, ip, port);
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    address_of(sock_, false, ip, port);
  }
  socket_t socket() const override { return sock_; }

  // Whether a next request has (begun to) arrive within `timeout`; polls in short steps so that
  // a stopping server is noticed, as httplib's keep-alive wait does.
  template <typename Stopping>
  bool next_request(Clock::duration timeout, Stopping stopping) const {
    if (begin_ < end_) return true;  // pipelined: already read
    const auto end = Clock::now() + timeout;
    while (!stopping()) {
      if (wait_for(sock_, POLLIN, std::chrono::milliseconds(50))) return true;
      if (Clock::now() >= end) return false;
    }
    return false;
  }

 private:
  int sock_;
  Clock::duration read_timeout_;
  Clock::duration write_timeout_;
  std::array<char, 4096> buf_{};
  std::size_t begin_ = 0;
  std::size_t end_ = 0;
};

Clock::duration duration_of(time_t sec, time_t usec) {
  return std::chrono::seconds(sec) + std::chrono::microseconds(usec);
}

}  // namespace

// httplib's loop, less the per-request stream: up to keep_alive_max_count_ requests, each
// awaited at most keep_alive_timeout_sec_, the last answered with "Connection: close".
// process_request returns false when the connection must end (a write failed, or an answer
// that closes, see front_door::answer_and_close).
bool PlainHttpServer::process_and_close_socket(socket_t sock) {
  BufferedSocketStream strm(sock, duration_of(read_timeout_sec_, read_timeout_usec_),
                            duration_of(write_timeout_sec_, write_timeout_usec_));
  auto stopping = [this] { return svr_sock_ == INVALID_SOCKET; };
  bool ok = false;
  for (std::size_t left = keep_alive_max_count_; left > 0; --left) {
    if (!strm.next_request(std::chrono::seconds(keep_alive_timeout_sec_), stopping)) break;
    bool closed = false;
    ok = process_request(strm, left == 1, closed, nullptr);
    if (!ok || closed) break;
  }
  ::shutdown(sock, SHUT_RDWR);
  ::close(sock);
  return ok;
}

}  // namespace gapless::server
