// HTTPS through the front (src/door/http_session.h, issue 17 finding 1 "before and during
// the TLS handshake"): idle TCP connections and ClientHellos trickling in hold no worker, a
// handshake must finish within --request-timeout, the connection limits hold, and pipelined
// requests are answered in order. Before, HTTPS kept cpp-httplib's thread-per-connection model
// and every one of these failed. Outcomes are asserted (answered / closed); times only bound the
// tests.
#include <netinet/in.h>
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <catch2/catch.hpp>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gapless/door/door.h"
#include "gapless/door/probe_routes.h"
#include "gate.h"
#include "raw_connection.h"
#include "tls_support.h"

namespace gapless::test {
namespace {

using namespace std::chrono_literals;
using namespace tls;

// Each read's bound: only ends a test whose server wrongly keeps a connection; far above the
// limits under test.
constexpr int kReadBound = 20;

// Reads until the server closes (true) or the read bound passes (false).
bool closed_by_server(RawConnection& c) {
  bool closed = false;
  c.read_all(&closed);
  return closed;
}

// `n` TCP connections to `port` that send nothing yet.
std::vector<std::unique_ptr<RawConnection>> raw_connections(int port, int n) {
  std::vector<std::unique_ptr<RawConnection>> out;
  for (int i = 0; i < n; ++i) out.push_back(std::make_unique<RawConnection>(port, kReadBound));
  return out;
}

// The first flight of a TLS client: a real ClientHello, made with memory BIOs.
std::string client_hello() {
  std::unique_ptr<SSL_CTX, void (*)(SSL_CTX*)> ctx(SSL_CTX_new(TLS_client_method()), SSL_CTX_free);
  SSL* ssl = SSL_new(ctx.get());
  BIO* in = BIO_new(BIO_s_mem());
  BIO* out = BIO_new(BIO_s_mem());
  SSL_set_bio(ssl, in, out);  // owned by ssl from here
  SSL_set_connect_state(ssl);
  SSL_do_handshake(ssl);  // WANT_READ, after writing the ClientHello to `out`
  std::string hello;
  std::array<char, 4096> buf{};
  int n = 0;
  while ((n = BIO_read(out, buf.data(), static_cast<int>(buf.size()))) > 0)
    hello.append(buf.data(), n);
  SSL_free(ssl);
  return hello;
}

// A blocking TLS client on a raw socket (no certificate check): sends bytes as given, so several
// requests can go in one write.
class TlsRaw {
 public:
  explicit TlsRaw(int port)
      : tcp_(port, kReadBound),
        ctx_(SSL_CTX_new(TLS_client_method()), SSL_CTX_free),
        ssl_(SSL_new(ctx_.get())) {
    SSL_set_fd(ssl_, tcp_.fd());
    connected_ = SSL_connect(ssl_) == 1;
  }
  ~TlsRaw() { SSL_free(ssl_); }
  TlsRaw(const TlsRaw&) = delete;
  TlsRaw& operator=(const TlsRaw&) = delete;

  bool connected() const { return connected_; }
  bool send(const std::string& bytes) {
    return SSL_write(ssl_, bytes.data(), static_cast<int>(bytes.size())) ==
           static_cast<int>(bytes.size());
  }
  // Reads until `end` has arrived (or the connection ends): one answer on a kept connection.
  std::string read_until(const std::string& end) {
    std::string out;
    std::array<char, 4096> buf{};
    int n = 0;
    while (out.find(end) == std::string::npos &&
           (n = SSL_read(ssl_, buf.data(), static_cast<int>(buf.size()))) > 0)
      out.append(buf.data(), n);
    return out;
  }
  std::string read_all() {
    std::string out;
    std::array<char, 4096> buf{};
    int n = 0;
    while ((n = SSL_read(ssl_, buf.data(), static_cast<int>(buf.size()))) > 0)
      out.append(buf.data(), n);
    return out;
  }

 private:
  RawConnection tcp_;
  std::unique_ptr<SSL_CTX, void (*)(SSL_CTX*)> ctx_;
  SSL* ssl_;
  bool connected_ = false;
};

// Once armed, holds every TLS handshake that reaches the server's ClientHello callback (the
// server's part of the handshake, where its signature is computed) at `gate` until it opens.
struct HandshakeHold {
  void install(SSL_CTX* ctx) { SSL_CTX_set_client_hello_cb(ctx, &HandshakeHold::on_hello, this); }
  static int on_hello(SSL*, int*, void* arg) {
    auto& hold = *static_cast<HandshakeHold*>(arg);
    if (hold.armed) hold.gate.pass();
    return SSL_CLIENT_HELLO_SUCCESS;
  }
  std::atomic<bool> armed{false};
  Gate gate;
};

// An HTTPS door with the probe routes (/healthz on the loop, /version on a worker), a gate on
// its handshakes, and a client thread; torn down in the order that lets each part finish.
struct GatedDoor {
  explicit GatedDoor(const Pki& pki)
      : routes("gapless-test", [] { return std::string(); }), door(routes, options(pki)) {}
  ~GatedDoor() {
    hold.gate.open();
    if (client.joinable()) client.join();
    door.stop();
    if (loop.joinable()) loop.join();
  }
  GatedDoor(const GatedDoor&) = delete;
  GatedDoor& operator=(const GatedDoor&) = delete;

  static door::DoorOptions options(const Pki& pki) {
    door::DoorOptions o;
    o.tls_cert_file = pki.path("server.crt");
    o.tls_key_file = pki.path("server.key");
    o.workers = 1;
    return o;
  }

  door::ProbeRoutes routes;
  door::Door door;
  HandshakeHold hold;
  std::thread loop;
  std::thread client;
};

const std::string kFilterBody = extender_args(gpu_pod("p", "uid-p", 1), {"h100-nvs-01"});

// Sends `bytes` one at a time on every connection, round robin, until told to stop.
class Trickle {
 public:
  Trickle(std::vector<std::unique_ptr<RawConnection>>& conns, std::string bytes)
      : thread_([this, &conns, bytes = std::move(bytes)] {
          for (std::size_t i = 0; i < bytes.size() && !stop_; ++i) {
            for (auto& c : conns) c->send(std::string(1, bytes[i]));
            std::this_thread::sleep_for(100ms);  // the attacker's pace, not an assertion
          }
        }) {}
  ~Trickle() {
    stop_ = true;
    thread_.join();
  }
  Trickle(const Trickle&) = delete;
  Trickle& operator=(const Trickle&) = delete;

 private:
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace

TEST_CASE("HTTPS: idle and trickling TLS connections do not stop a normal client",
          "[server][tls][door]") {
  const Pki* pki = pki_or_skip();
  if (pki == nullptr) return;
  server::HttpOptions o = tls_options(*pki, false);
  o.workers = 2;
  o.max_queue = 2;
  o.max_connections_per_peer = 1024;  // all from 127.0.0.1, like the normal client
  LiveServer srv(o);
  const auto idle = raw_connections(srv.port(), 200);  // TCP connected, no ClientHello
  auto slow = raw_connections(srv.port(), 50);         // a ClientHello a byte at a time
  Trickle trickle(slow, client_hello());

  for (int i = 0; i < 3; ++i) {
    auto c = https_client("127.0.0.1", srv.port(), pki->path("ca.crt"));
    auto res = c->Post("/filter", kFilterBody, "application/json");
    INFO(httplib::to_string(res.error()));
    REQUIRE(res);
    CHECK(res->status == 200);
    CHECK(json::parse(res->body).at("NodeNames") == json::array({"h100-nvs-01"}));
    auto health = c->Get("/healthz");  // the same connection again
    REQUIRE(health);
    CHECK(health->status == 200);
  }
}

TEST_CASE("HTTPS: a handshake not finished within --request-timeout is closed",
          "[server][tls][door]") {
  const Pki* pki = pki_or_skip();
  if (pki == nullptr) return;
  server::HttpOptions o = tls_options(*pki, false);
  o.request_timeout = 1s;  // --read-timeout stays 30 s, beyond the test's 20 s receive bound
  LiveServer srv(o);
  const std::string hello = client_hello();
  RawConnection silent(srv.port(), kReadBound);
  RawConnection partial(srv.port(), kReadBound);
  REQUIRE(partial.send(hello.substr(0, hello.size() / 2)));
  CHECK(closed_by_server(silent));
  CHECK(closed_by_server(partial));
  CHECK(eventually([&] { return srv.connections_cut("request_timeout") == 2; }));
  CHECK(https_ok(*pki, srv.port()));  // a client that handshakes in time is served
}

TEST_CASE("HTTPS: a failed handshake closes the connection and is counted", "[server][tls][door]") {
  const Pki* pki = pki_or_skip();
  if (pki == nullptr) return;
  LiveServer srv(tls_options(*pki, false));
  RawConnection plain(srv.port(), kReadBound);  // plain HTTP to the HTTPS port
  REQUIRE(plain.send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"));
  CHECK(closed_by_server(plain));
  CHECK(eventually([&] { return srv.connections_cut("tls_handshake") == 1; }));
  CHECK(srv.connections_cut("request_timeout") == 0);
}

TEST_CASE("HTTPS: --max-connections-per-peer and --max-connections hold",
          "[server][tls][door][limits]") {
  const Pki* pki = pki_or_skip();
  if (pki == nullptr) return;
  // A TLS client refused at the accept may write its handshake after the server closed: the
  // test process must not die of SIGPIPE (gapless-extender ignores it too).
  std::signal(SIGPIPE, SIG_IGN);
  server::HttpOptions o = tls_options(*pki, false);
  o.max_connections_per_peer = 3;
  o.probe_connections = 0;  // no reserve for probes: closed at the accept
  LiveServer srv(o);
  auto held = raw_connections(srv.port(), 3);
  RawConnection extra(srv.port(), kReadBound);
  CHECK(closed_by_server(extra));  // closed at once: no answer is possible before a handshake
  held.pop_back();
  bool served = false;  // the door notices the close within its poll round; retry for a while
  for (int i = 0; i < 50 && !served; ++i) {
    served = https_ok(*pki, srv.port());
    if (!served) std::this_thread::sleep_for(20ms);
  }
  CHECK(served);

  o.max_connections_per_peer = 256;
  o.max_connections = 2;
  LiveServer total(o);
  RawConnection a(total.port(), kReadBound);
  RawConnection b(total.port(), kReadBound);
  RawConnection c(total.port(), kReadBound);
  CHECK(closed_by_server(c));
}

TEST_CASE("HTTPS: pipelined requests on one connection are answered in order",
          "[server][tls][door]") {
  const Pki* pki = pki_or_skip();
  if (pki == nullptr) return;
  LiveServer srv(tls_options(*pki, false));
  TlsRaw conn(srv.port());
  REQUIRE(conn.connected());
  const std::string filter =
      "POST /filter HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
      "Content-Length: " +
      std::to_string(kFilterBody.size()) + "\r\n\r\n" + kFilterBody;
  REQUIRE(conn.send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n" + filter +
                    "GET /version HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
  const std::string answers = conn.read_all();
  INFO(answers);
  const auto first = answers.find("ok\n");
  const auto second = answers.find("h100-nvs-01");
  const auto third = answers.find("gapless-extender");
  CHECK(first != std::string::npos);
  CHECK(second != std::string::npos);
  CHECK(third != std::string::npos);
  CHECK(first < second);
  CHECK(second < third);
}

TEST_CASE("HTTPS: a handshake being computed holds neither probes nor requests",
          "[server][tls][door]") {
  const Pki* pki = pki_or_skip();
  if (pki == nullptr) return;
  std::signal(SIGPIPE, SIG_IGN);
  GatedDoor d(*pki);
  auto port = d.door.bind("127.0.0.1", 0);
  REQUIRE(port);
  d.hold.install(d.door.tls_context());
  d.loop = std::thread([&] { d.door.run(); });
  TlsRaw kept(*port);  // handshaked before, as kube-scheduler keeps its connections
  REQUIRE(kept.connected());
  // Once answered, the server's side of its handshake is over too (TLS 1.3: the client's ends
  // first, and its Finished could otherwise wait behind the held handshake).
  REQUIRE(kept.send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"));
  REQUIRE(kept.read_until("ok\n").find("ok\n") != std::string::npos);

  d.hold.armed = true;
  std::atomic<bool> held_served{false};
  d.client = std::thread([&] {
    TlsRaw late(*port);
    held_served = late.connected() &&
                  late.send("GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n") &&
                  late.read_all().find("ok\n") != std::string::npos;
  });
  // The server is inside that client's handshake, and stays there.
  REQUIRE(eventually([&] { return d.hold.gate.entered() == 1; }));

  // Answered while it is held: before, the handshake ran on the loop, which held everything.
  REQUIRE(
      kept.send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
                "GET /version HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
  const std::string answers = kept.read_all();
  INFO(answers);
  CHECK(answers.find("ok\n") != std::string::npos);
  CHECK(answers.find("gapless-test") != std::string::npos);
  CHECK_FALSE(held_served);

  d.hold.gate.open();  // the held handshake finishes, and its request is served
  d.client.join();
  CHECK(held_served);
}

}  // namespace gapless::test
