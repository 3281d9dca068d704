// Issue 28, "workers never wait on a client": 2 x --workers attackers that send a chunked body
// or an "Expect: 100-continue" body and then stall, or ask for answers they never read, hold no
// worker: a normal filter and /healthz are answered while every attacker still holds its
// connection (--request-timeout and --write-timeout are set far beyond the test, so the server
// cannot have freed a worker by cutting one). Probes answer under a connection flood, and a
// deferred answer (/bind) holds no worker either. Outcomes are asserted, not times: the clients'
// own timeouts only end a test whose server wrongly waits.
#include <poll.h>
#include <sys/socket.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "eventually.h"
#include "live_server.h"
#include "raw_connection.h"

namespace gapless::test {
namespace {

using namespace std::chrono_literals;

const std::string kFilterBody = extender_args(gpu_pod("p", "uid-p", 1), {"h100-nvs-01"});

// Attack settings: two workers, and limits that cannot free them during the test.
server::HttpOptions attacked() {
  server::HttpOptions o;
  o.workers = 2;
  o.max_queue = 8;
  o.request_timeout = std::chrono::seconds(600);
  o.read_timeout = std::chrono::seconds(600);
  o.write_timeout = std::chrono::seconds(600);
  return o;
}

// Whether the server still holds `c` open: nothing to read and no end of stream.
bool still_open(const RawConnection& c) {
  pollfd p{c.fd(), POLLIN, 0};
  if (::poll(&p, 1, 0) == 0) return true;
  char byte = 0;
  return ::recv(c.fd(), &byte, 1, MSG_PEEK | MSG_DONTWAIT) > 0;  // data, but not closed
}

// A normal client's filter and probe, each with a 20 s bound the attackers would exceed by far
// on a server whose workers they hold (600 s).
void check_served(const LiveServer& srv) {
  httplib::Client c("127.0.0.1", srv.port());
  c.set_read_timeout(20);
  c.set_write_timeout(20);
  auto health = c.Get("/healthz");
  INFO(httplib::to_string(health.error()));
  REQUIRE(health);
  CHECK(health->body == "ok\n");
  for (int i = 0; i < 3; ++i) {
    auto res = c.Post("/filter", kFilterBody, "application/json");
    INFO(httplib::to_string(res.error()));
    REQUIRE(res);
    CHECK(json::parse(res->body).at("NodeNames") == json::array({"h100-nvs-01"}));
  }
}

std::vector<std::unique_ptr<RawConnection>> attackers(const LiveServer& srv, int n,
                                                      const std::string& opening) {
  std::vector<std::unique_ptr<RawConnection>> out;
  for (int i = 0; i < n; ++i) {
    out.push_back(std::make_unique<RawConnection>(srv.port(), 20));
    REQUIRE(out.back()->send(opening));
  }
  return out;
}

}  // namespace

TEST_CASE("stalled chunked bodies hold no worker", "[server][slow]") {
  LiveServer srv(attacked());
  const auto held = attackers(srv, 4,
                              "POST /filter HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
                              "\r\n10\r\n{\"Pod\":");
  check_served(srv);
  for (const auto& c : held) CHECK(still_open(*c));
  // The worker that answered the last filter marks itself idle just after its answer left: wait
  // for that, while every attacker still holds its connection (600 s limits).
  CHECK(eventually([&] { return srv.http().busy_workers() == 0; }));
  for (const auto& c : held) CHECK(still_open(*c));
}

TEST_CASE("stalled Expect: 100-continue bodies hold no worker; the loop says continue",
          "[server][slow]") {
  LiveServer srv(attacked());
  const auto held = attackers(srv, 4,
                              "POST /filter HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
                              "Content-Length: 1000\r\n\r\n");
  for (const auto& c : held) {
    std::string got;
    char buf[64];
    while (got.find("\r\n\r\n") == std::string::npos) {
      const ssize_t n = ::recv(c->fd(), buf, sizeof buf, 0);
      REQUIRE(n > 0);
      got.append(buf, static_cast<std::size_t>(n));
    }
    CHECK(got == "HTTP/1.1 100 Continue\r\n\r\n");
    REQUIRE(c->send("{\"Pod\":"));  // and then nothing more
  }
  check_served(srv);
  for (const auto& c : held) CHECK(still_open(*c));
}

TEST_CASE("clients that never read their answers hold no worker", "[server][slow]") {
  LiveServer srv(attacked());
  // Each asks for many answers in one write and reads none: far more than the socket buffers
  // take, so the server's writes wait on them.
  std::string pipeline;
  for (int i = 0; i < 4000; ++i) pipeline += "GET /debug/state HTTP/1.1\r\nHost: x\r\n\r\n";
  std::vector<std::unique_ptr<RawConnection>> held;
  for (int i = 0; i < 4; ++i) {
    held.push_back(std::make_unique<RawConnection>(srv.port(), 20));
    int small = 4096;
    setsockopt(held.back()->fd(), SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    REQUIRE(held.back()->send(pipeline));
  }
  check_served(srv);
  for (const auto& c : held) CHECK(still_open(*c));
}

TEST_CASE("probes answer under a connection flood; others get 503 on the reserve",
          "[server][limits][probes]") {
  server::HttpOptions o;
  o.max_connections = 8;
  o.probe_connections = 4;
  LiveServer srv(o);
  std::vector<std::unique_ptr<RawConnection>> flood;
  for (int i = 0; i < 8; ++i) flood.push_back(std::make_unique<RawConnection>(srv.port(), 20));
  // The limit is reached: a probe still gets in, on the reserve.
  auto health = srv.client().Get("/healthz");
  REQUIRE(health);
  CHECK(health->status == 200);
  auto ready = srv.client().Get("/readyz");
  REQUIRE(ready);
  CHECK(ready->status == 200);
  auto metrics = srv.client().Get("/metrics");
  REQUIRE(metrics);
  CHECK(metrics->status == 200);
  // Anything else on a reserve connection is refused and counted.
  auto version = srv.client().Get("/version");
  REQUIRE(version);
  CHECK(version->status == 503);
  CHECK(srv.connections_cut("max_connections") >= 1);
  // Beyond the reserve too: refused at the accept.
  for (int i = 0; i < 4; ++i) flood.push_back(std::make_unique<RawConnection>(srv.port(), 20));
  RawConnection extra(srv.port(), 20);
  CHECK(extra.read_all().rfind("HTTP/1.1 503", 0) == 0);
}

TEST_CASE("a deferred bind answers later from another thread, holding no worker",
          "[server][deferred]") {
  std::mutex mu;
  std::vector<std::function<void(std::string)>> pending;
  std::vector<std::string> bodies;
  server::HttpOptions o;
  o.workers = 1;  // filters below could not be answered if the bind held this one
  o.max_queue = 4;
  o.deferred_timeout = 1s;
  o.bind_async = [&](std::string body, std::function<void(std::string)> done) {
    std::lock_guard lock(mu);  // asserted on the test's thread: Catch2 is not thread-safe
    bodies.push_back(std::move(body));
    pending.push_back(std::move(done));
  };
  LiveServer srv(o);
  auto waiting = [&] {
    std::lock_guard lock(mu);
    return pending.size();
  };
  std::string bind_answer;
  std::jthread binder([&] {
    auto res =
        srv.client().Post("/bind", bind_args("p", "uid-p", "h100-nvs-01"), "application/json");
    if (res) bind_answer = res->body;
  });
  REQUIRE(eventually([&] { return waiting() == 1; }));
  {
    std::lock_guard lock(mu);
    CHECK(json::parse(bodies[0]).at("PodName") == "p");
  }
  check_served(srv);  // the bind is pending and the only worker is free
  CHECK(eventually([&] { return srv.http().busy_workers() == 0; }));  // idle just after its answer
  {
    std::function<void(std::string)> done;
    {
      std::lock_guard lock(mu);
      done = pending[0];
    }
    std::thread([done] {
      done(R"({"Error":""})");
      done(R"({"Error":"a second call is ignored"})");
    }).join();
  }
  binder.join();
  CHECK(bind_answer == R"({"Error":""})");

  // A deferred answer that never comes: an Error after --deferred-timeout, then closed.
  auto res = srv.client().Post("/bind", bind_args("p", "uid-p", "h100-nvs-01"), "application/json");
  REQUIRE(res);
  CHECK(res->status == 200);
  CHECK(json::parse(res->body).at("Error").get<std::string>().find("--deferred-timeout") !=
        std::string::npos);
  std::function<void(std::string)> late;
  {
    std::lock_guard lock(mu);
    REQUIRE(pending.size() == 2);
    late = pending[1];
  }
  late(R"({"Error":""})");  // too late: dropped, harmlessly
  check_served(srv);
}

}  // namespace gapless::test
