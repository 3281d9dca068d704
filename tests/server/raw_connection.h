// A plain TCP connection to 127.0.0.1:port for tests that speak to the server byte by byte
// (idle and trickling clients, framing, limits). Closed when destroyed.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <catch2/catch.hpp>
#include <cerrno>
#include <cstdint>
#include <string>

namespace gapless::test {

class RawConnection {
 public:
  // `read_bound_s`: every read gives up after this long. The test's own bound: set it far above
  // the server limits under test, so it only ends a test whose server wrongly holds on.
  RawConnection(int port, int read_bound_s) : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    REQUIRE(fd_ >= 0);
    timeval tv{read_bound_s, 0};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<std::uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  }
  ~RawConnection() { ::close(fd_); }
  RawConnection(const RawConnection&) = delete;
  RawConnection& operator=(const RawConnection&) = delete;

  int fd() const { return fd_; }
  // Whether every byte went out.
  bool send(const std::string& bytes) {
    return ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) ==
           static_cast<ssize_t>(bytes.size());
  }
  // Everything until the server closes the connection or the read bound passes; `closed`, when
  // given, says whether the server closed it (end of stream or reset).
  std::string read_all(bool* closed = nullptr) {
    std::string out;
    std::array<char, 4096> buf{};
    ssize_t n = 0;
    while ((n = ::recv(fd_, buf.data(), buf.size(), 0)) > 0) out.append(buf.data(), n);
    if (closed != nullptr) *closed = n == 0 || (n < 0 && errno == ECONNRESET);
    return out;
  }

 private:
  int fd_;
};

}  // namespace gapless::test
