#include "plain_connection.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <csignal>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string_view>
#include <thread>
#include <vector>

#include "door_transport.h"
#include "gapless/model/ascii.h"

namespace gapless::server {

namespace {

using Clock = std::chrono::steady_clock;

// A head this long without its blank line goes to a worker, where httplib refuses it. Every
// connection may buffer this much (kDoorAlways), so a head is never cut short by the budget.
constexpr std::size_t kMaxHead = kDoorAlways;

constexpr std::string_view kTimedOut =
    "HTTP/1.1 408 Request Timeout\r\nConnection: close\r\nContent-Type: text/plain\r\n"
    "Content-Length: 47\r\n\r\nrequest not complete within --request-timeout\r\n";
constexpr std::string_view kTooMany =
    "HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nRetry-After: 1\r\n"
    "Content-Type: text/plain\r\nContent-Length: 78\r\n\r\n"
    "too many connections (--max-connections, --max-connections-per-peer); retry\r\n\r\n";

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

// The values of every header `name` in `head` (the request line's excluded), trimmed.
std::vector<std::string_view> headers(std::string_view head, std::string_view name) {
  std::vector<std::string_view> out;
  std::size_t pos = head.find("\r\n");
  while (pos != std::string_view::npos && pos + 2 < head.size()) {
    const std::size_t start = pos + 2;
    const std::size_t end = std::min(head.find("\r\n", start), head.size());
    std::string_view line = head.substr(start, end - start);
    if (const std::size_t colon = line.find(':');
        colon != std::string_view::npos && model::ascii_iequals(line.substr(0, colon), name)) {
      std::string_view value = line.substr(colon + 1);
      while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) {
        value.remove_prefix(1);
      }
      while (!value.empty() && (value.back() == ' ' || value.back() == '\t'))
        value.remove_suffix(1);
      out.push_back(value);
    }
    pos = end;
  }
  return out;
}

// Whether `data` (the start of a request) is enough for a worker: the whole request is there,
// or the worker must take over the reading (see plain_connection.h), or it is not a request
// httplib would wait for anyway. `full`: the door may not buffer more of this connection.
bool request_ready(std::string_view data, std::size_t max_body, bool full) {
  const std::size_t head_end = data.find("\r\n\r\n");
  if (head_end == std::string_view::npos) return data.size() >= kMaxHead;
  const std::string_view head = data.substr(0, head_end + 2);
  if (!headers(head, "Transfer-Encoding").empty() || !headers(head, "Expect").empty()) return true;
  // No body, or framing the front door refuses (front_door::framing_problem) without reading it.
  const auto lengths = headers(head, "Content-Length");
  if (lengths.size() != 1) return true;
  const std::string_view length = lengths.front();
  std::size_t n = 0;
  auto [end, ec] = std::from_chars(length.data(), length.data() + length.size(), n);
  if (ec != std::errc() || end != length.data() + length.size()) return true;
  const std::size_t have = data.size() - (head_end + 4);
  return n > max_body || have >= n || full;
}

}  // namespace

// One connection and what has been read from it but not yet parsed.
struct PlainConn {
  std::unique_ptr<Transport> io;
  std::string ip;
  std::string buf;
  std::size_t begin = 0;               // buf[begin..] is unread
  bool in_request = false;             // a request's first byte has arrived
  Clock::time_point request_deadline;  // --request-timeout after that byte
  // When the door gives up: the keep-alive wait when idle, else --read-timeout after the last
  // byte but never past request_deadline.
  Clock::time_point deadline;
  std::size_t requests_left = 0;

  std::string_view unread() const { return std::string_view(buf).substr(begin); }
  // Drops what was parsed, and memory a large request left behind.
  void compact() {
    buf.erase(0, begin);
    begin = 0;
    if (buf.capacity() > kDoorAlways) buf.shrink_to_fit();
  }
  // Bytes beyond kDoorAlways: what counts against the door's kDoorBudget.
  std::size_t over() const { return buf.size() > kDoorAlways ? buf.size() - kDoorAlways : 0; }
};

namespace {

// The worker's view of a connection: reads come from the door's buffer first, then from the
// transport, never past the request's deadline; each read or write waits at most its timeout.
class ConnStream : public httplib::Stream {
 public:
  ConnStream(PlainConn& c, Clock::duration read_timeout, Clock::duration write_timeout)
      : c_(c), read_timeout_(read_timeout), write_timeout_(write_timeout) {}

  bool is_readable() const override {
    if (c_.begin < c_.buf.size() || c_.io->pending()) return true;
    pollfd p{c_.io->sock(), POLLIN, 0};
    const auto wait = std::chrono::ceil<std::chrono::milliseconds>(read_end() - Clock::now());
    return ::poll(&p, 1, static_cast<int>(std::max<std::int64_t>(wait.count(), 0))) > 0;
  }
  bool is_writable() const override {
    pollfd p{c_.io->sock(), POLLOUT, 0};
    const auto wait = std::chrono::ceil<std::chrono::milliseconds>(write_timeout_);
    return ::poll(&p, 1, static_cast<int>(wait.count())) > 0;
  }

  ssize_t read(char* ptr, size_t size) override {
    if (c_.begin == c_.buf.size()) {
      c_.buf.clear();
      c_.begin = 0;
      std::array<char, 16384> tmp{};
      const ssize_t n = c_.io->read(tmp.data(), tmp.size(), read_end());
      if (n <= 0) return n;  // 0: the peer closed
      c_.buf.append(tmp.data(), static_cast<std::size_t>(n));
    }
    const std::size_t n = std::min(size, c_.buf.size() - c_.begin);
    std::memcpy(ptr, c_.buf.data() + c_.begin, n);
    c_.begin += n;
    return static_cast<ssize_t>(n);
  }

  ssize_t write(const char* ptr, size_t size) override {
    return c_.io->write(ptr, size, Clock::now() + write_timeout_);
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    address_of(c_.io->sock(), true, ip, port);
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    address_of(c_.io->sock(), false, ip, port);
  }
  socket_t socket() const override { return c_.io->sock(); }

 private:
  // One read waits --read-timeout at most, and never past the request's deadline.
  Clock::time_point read_end() const {
    return std::min(Clock::now() + read_timeout_, c_.request_deadline);
  }

  PlainConn& c_;
  Clock::duration read_timeout_;
  Clock::duration write_timeout_;
};

}  // namespace

struct DoorTimeouts {
  Clock::duration read;
  Clock::duration write;
  Clock::duration keep_alive;
  std::size_t keep_alive_max_count;
};

// The door: admits connections, watches those without a complete request on one thread, and
// hands the others to the workers. Lives for one listen (httplib's task queue's lifetime).
class Door {
 public:
  Door(DoorServer& server, SSL_CTX* tls, DoorLimits limits, DoorTimeouts timeouts,
       std::unique_ptr<httplib::TaskQueue> workers)
      : server_(server),
        tls_(tls),
        limits_(limits),
        timeouts_(timeouts),
        workers_(std::move(workers)),
        wake_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
    thread_ = std::thread([this] { run(); });
  }
  ~Door() {
    stop();
    if (wake_ >= 0) ::close(wake_);
  }
  Door(const Door&) = delete;
  Door& operator=(const Door&) = delete;

  // On the accept thread: refused at once over a limit, else watched by the door. Neither reads
  // nor handshakes: the door thread does, without blocking.
  void admit(int sock) {
    auto c = std::make_shared<PlainConn>();
    int port = 0;
    address_of(sock, true, c->ip, port);
    c->requests_left = timeouts_.keep_alive_max_count;
    {
      std::lock_guard lock(mu_);
      std::size_t& mine = per_peer_[c->ip];
      if (stopping_ || total_ >= limits_.max_connections ||
          mine >= limits_.max_connections_per_peer) {
        if (!stopping_) {
          cut(total_ >= limits_.max_connections ? "max_connections" : "max_connections_per_peer");
        }
        if (mine == 0) per_peer_.erase(c->ip);
        // Over HTTPS no answer can be sent before a handshake: the client sees the close.
        Transport refused(sock, nullptr);
        if (tls_ == nullptr) refused.send_now(kTooMany);
        return;
      }
      ++mine;
      ++total_;
    }
    SSL* ssl = tls_ == nullptr ? nullptr : tls_session(sock);
    c->io = std::make_unique<Transport>(sock, ssl);
    if (tls_ != nullptr && ssl == nullptr) return release(*c);
    const auto now = Clock::now();
    c->deadline = now + timeouts_.keep_alive;
    if (c->io->tls()) start_request(*c, now);  // the handshake is part of the first request
    hand_back(std::move(c));
  }

  // Stops watching: closes the connections the door holds and lets the workers finish theirs.
  void stop() {
    {
      std::lock_guard lock(mu_);
      if (stopping_ && !thread_.joinable()) return;
      stopping_ = true;
    }
    wake();
    if (thread_.joinable()) thread_.join();
    workers_->shutdown();
  }

  std::size_t open() const {
    std::lock_guard lock(mu_);
    return total_;
  }

 private:
  // A TLS session on `sock` in accept state, the socket made non-blocking; null if OpenSSL
  // cannot make one.
  SSL* tls_session(int sock) const {
    ::fcntl(sock, F_SETFL, ::fcntl(sock, F_GETFL) | O_NONBLOCK);
    SSL* ssl = SSL_new(tls_);
    if (ssl != nullptr && SSL_set_fd(ssl, sock) == 1) {
      SSL_set_accept_state(ssl);
      return ssl;
    }
    SSL_free(ssl);
    return nullptr;
  }

  // Gives a connection (back) to the door thread.
  void hand_back(std::shared_ptr<PlainConn> c) {
    {
      std::lock_guard lock(mu_);
      if (!stopping_) {
        incoming_.push_back(std::move(c));
        c = nullptr;
      }
    }
    if (c) return release(*c);
    wake();
  }

  void cut(const char* reason) const {
    if (limits_.count_cut) limits_.count_cut(reason);
  }

  void wake() {
    const std::uint64_t one = 1;
    [[maybe_unused]] const ssize_t n = ::write(wake_, &one, sizeof(one));
  }

  void release(PlainConn& c) {
    {
      std::lock_guard lock(mu_);
      if (--per_peer_[c.ip] == 0) per_peer_.erase(c.ip);
      --total_;
    }
    c.io->close();
  }

  void run() {
    std::vector<std::shared_ptr<PlainConn>> watched;
    std::vector<pollfd> fds;
    for (;;) {
      {
        std::lock_guard lock(mu_);
        if (stopping_) break;
        for (auto& c : incoming_) watched.push_back(std::move(c));
        incoming_.clear();
      }
      fds.assign(1, pollfd{wake_, POLLIN, 0});
      for (const auto& c : watched) fds.push_back(pollfd{c->io->sock(), c->io->events(), 0});
      ::poll(fds.data(), fds.size(), poll_timeout_ms(watched));
      std::uint64_t drained = 0;
      [[maybe_unused]] const ssize_t n = ::read(wake_, &drained, sizeof(drained));
      visit(watched, fds);
    }
    for (auto& c : watched) release(*c);
    std::vector<std::shared_ptr<PlainConn>> left;
    {
      std::lock_guard lock(mu_);
      left.swap(incoming_);
    }
    for (auto& c : left) release(*c);
  }

  // Until the nearest deadline, at most 100 ms (a stopping server is also noticed that way); no
  // wait when a TLS session already holds decrypted bytes.
  static int poll_timeout_ms(const std::vector<std::shared_ptr<PlainConn>>& watched) {
    auto wait = std::chrono::milliseconds(100);
    const auto now = Clock::now();
    for (const auto& c : watched) {
      wait = std::min(wait, std::chrono::ceil<std::chrono::milliseconds>(c->deadline - now));
      if (c->io->pending()) wait = std::chrono::milliseconds(0);
    }
    return static_cast<int>(std::max<std::int64_t>(wait.count(), 0));
  }

  // Reads what arrived, hands complete requests to the workers, closes what ran out of time.
  void visit(std::vector<std::shared_ptr<PlainConn>>& watched, const std::vector<pollfd>& fds) {
    const auto now = Clock::now();
    over_ = 0;
    for (const auto& c : watched) over_ += c->over();
    std::size_t kept = 0;
    for (std::size_t i = 0; i < watched.size(); ++i) {
      std::shared_ptr<PlainConn>& c = watched[i];
      const bool ready =
          (fds[i + 1].revents & (POLLIN | POLLOUT | POLLHUP | POLLERR)) != 0 || c->io->pending();
      if (ready && !progress(*c, now)) {
        if (c->io->tls() && !c->io->handshaken()) cut("tls_handshake");
        release(*c);
      } else if (c->in_request && c->io->handshaken() &&
                 request_ready(c->unread(), limits_.max_body_bytes, room(*c) == 0)) {
        over_ -= c->over();
        dispatch(std::move(c));
      } else if (now >= c->deadline) {
        if (c->in_request) {  // else an idle keep-alive connection, closed as usual
          c->io->send_now(kTimedOut);  // over TLS only once handshaken
          cut("request_timeout");
        }
        release(*c);
      } else {
        watched[kept++] = std::move(c);
      }
    }
    watched.resize(kept);
  }

  // How much more the door may buffer for `c` (see plain_connection.h).
  std::size_t room(const PlainConn& c) const {
    const std::size_t size = c.buf.size();
    if (size < kDoorAlways) return kDoorAlways - size;
    if (size >= kDoorBuffer || over_ >= kDoorBudget) return 0;
    return std::min(kDoorBuffer - size, kDoorBudget - over_);
  }

  // Advances the handshake, then appends what the transport has; false when the peer closed or
  // failed (a failed handshake too).
  bool progress(PlainConn& c, Clock::time_point now) {
    if (c.io->handshake() == Transport::Io::kClosed) return false;
    if (!c.io->handshaken()) return true;
    std::array<char, 16384> tmp{};
    for (;;) {  // over TLS until it wants the socket again: poll() cannot see decrypted bytes
      const std::size_t want = std::min(tmp.size(), room(c));
      if (want == 0) return true;
      std::size_t n = 0;
      const Transport::Io io = c.io->read_now(tmp.data(), want, &n);
      if (io == Transport::Io::kClosed) return false;
      if (io == Transport::Io::kAgain) return true;
      if (!c.in_request) start_request(c, now);
      c.deadline = std::min(c.request_deadline, now + timeouts_.read);
      const std::size_t before = c.over();
      c.buf.append(tmp.data(), n);
      over_ += c.over() - before;
      if (!c.io->tls()) return true;  // poll() reports the rest
    }
  }

  void start_request(PlainConn& c, Clock::time_point now) const {
    c.in_request = true;
    c.request_deadline = now + limits_.request_timeout;
    c.deadline = std::min(c.request_deadline, now + timeouts_.read);
  }

  void dispatch(std::shared_ptr<PlainConn> c) {
    workers_->enqueue([this, c] { serve(c); });
  }

  // On a worker: answers the buffered request (and any pipelined one that is complete), then
  // gives the connection back to the door to wait for the next.
  void serve(const std::shared_ptr<PlainConn>& c) {
    ConnStream strm(*c, timeouts_.read, timeouts_.write);
    for (;;) {
      bool closed = false;  // process_request only ever sets it
      const bool last = c->requests_left <= 1;
      const bool ok = !server_.stopping() && server_.serve_request(strm, last, &closed);
      --c->requests_left;
      if (!ok || closed || last || server_.stopping()) return release(*c);
      c->compact();
      c->in_request = false;
      c->deadline = Clock::now() + timeouts_.keep_alive;
      if (!c->buf.empty()) start_request(*c, Clock::now());  // pipelined
      if (!c->in_request || !request_ready(c->unread(), limits_.max_body_bytes, false)) {
        return hand_back(c);
      }
    }
  }

  DoorServer& server_;
  SSL_CTX* const tls_;  // null: plain HTTP
  const DoorLimits limits_;
  const DoorTimeouts timeouts_;
  std::unique_ptr<httplib::TaskQueue> workers_;
  int wake_;
  std::size_t over_ = 0;  // door thread only: bytes held beyond kDoorAlways, all connections
  mutable std::mutex mu_;
  bool stopping_ = false;
  std::vector<std::shared_ptr<PlainConn>> incoming_;  // admitted or given back, not yet watched
  std::map<std::string, std::size_t> per_peer_;       // open connections per peer address
  std::size_t total_ = 0;
  std::thread thread_;
};

namespace {

Clock::duration duration_of(time_t sec, time_t usec) {
  return std::chrono::seconds(sec) + std::chrono::microseconds(usec);
}

// What httplib's accept loop sees: enqueue() runs the admission right there (it only registers
// the socket), shutdown() stops the door and then the workers.
class DoorQueue : public httplib::TaskQueue {
 public:
  explicit DoorQueue(std::shared_ptr<Door> door) : door_(std::move(door)) {}
  void enqueue(std::function<void()> fn) override { fn(); }
  void shutdown() override { door_->stop(); }

 private:
  std::shared_ptr<Door> door_;
};

// A peer that closed makes a TLS close_notify or answer raise SIGPIPE (OpenSSL writes with
// write(2)): ignore it unless the program chose otherwise (gapless-extender ignores it too).
void ignore_sigpipe() {
  struct sigaction current {};
  if (sigaction(SIGPIPE, nullptr, &current) == 0 && current.sa_handler == SIG_DFL) {
    std::signal(SIGPIPE, SIG_IGN);
  }
}

}  // namespace

DoorServer::DoorServer(SSL_CTX* tls) : tls_(tls, SSL_CTX_free) {
  if (tls != nullptr) ignore_sigpipe();
}
DoorServer::~DoorServer() = default;

void DoorServer::serve_through(DoorLimits limits, std::function<httplib::TaskQueue*()> workers) {
  new_task_queue = [this, limits, workers = std::move(workers)] {
    const DoorTimeouts t{duration_of(read_timeout_sec_, read_timeout_usec_),
                         duration_of(write_timeout_sec_, write_timeout_usec_),
                         std::chrono::seconds(keep_alive_timeout_sec_), keep_alive_max_count_};
    auto door = std::make_shared<Door>(*this, tls_.get(), limits, t,
                                       std::unique_ptr<httplib::TaskQueue>(workers()));
    std::atomic_store(&door_, door);
    return new DoorQueue(std::move(door));
  };
}

std::size_t DoorServer::open_connections() const {
  auto door = std::atomic_load(&door_);
  return door ? door->open() : 0;
}

bool DoorServer::process_and_close_socket(socket_t sock) {
  if (auto door = std::atomic_load(&door_)) {
    door->admit(sock);
  } else {
    ::close(sock);  // serve_through was not called
  }
  return true;
}

bool DoorServer::serve_request(httplib::Stream& strm, bool last, bool* closed) {
  return process_request(strm, last, *closed, nullptr);
}

}  // namespace gapless::server
