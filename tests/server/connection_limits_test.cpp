// The plain-HTTP front (src/door/http_session.h, issue 17 finding 1): idle connections hold
// no worker, a request must be complete within --request-timeout however slowly it trickles in,
// and connections are bounded per peer address and in total, refused at once by the accept
// thread. Bounds in these tests are the tests' own, far above the behavior under test.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <catch2/catch.hpp>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "live_server.h"
#include "raw_connection.h"

namespace gapless::test {
namespace {

using namespace std::chrono_literals;

// One worker and a queue of one: before the door, two idle connections left every other request
// to the overflow lane (GET /version: 503). The queue of one absorbs the moment between a
// worker's answer and its return to the pool, which a sequential client can beat.
server::HttpOptions one_worker() {
  server::HttpOptions o;
  o.workers = 1;
  o.max_queue = 1;
  return o;
}

}  // namespace

TEST_CASE("idle connections hold no worker: requests are served normally beside them",
          "[server][limits][door]") {
  LiveServer srv(one_worker());
  std::vector<std::unique_ptr<RawConnection>> idle;
  for (int i = 0; i < 50; ++i) idle.push_back(std::make_unique<RawConnection>(srv.port(), 30));
  for (int i = 0; i < 5; ++i) {
    auto res = srv.client().Get("/version");  // 503 in the overflow lane
    REQUIRE(res);
    CHECK(res->status == 200);
  }
}

TEST_CASE("a request trickling in is cut off at --request-timeout with 408",
          "[server][limits][door]") {
  server::HttpOptions o = one_worker();
  o.request_timeout = 1s;  // --read-timeout stays 30 s: each byte arrives well within it
  LiveServer srv(o);
  RawConnection slow(srv.port(), 30);
  const std::string head = "GET /healthz HTTP/1.1\r\nHost: x\r\n";
  const auto t0 = std::chrono::steady_clock::now();
  std::string answer;
  std::thread trickle([&] {
    for (char ch : head) {
      if (!slow.send(std::string(1, ch))) return;
      std::this_thread::sleep_for(300ms);
    }
  });
  // Meanwhile the only worker is free for others.
  auto res = srv.client().Get("/version");
  answer = slow.read_all();
  const auto waited = std::chrono::steady_clock::now() - t0;
  trickle.join();
  REQUIRE(res);
  CHECK(res->status == 200);
  CHECK(answer.rfind("HTTP/1.1 408", 0) == 0);
  CHECK(eventually([&] { return srv.connections_cut("request_timeout") == 1; }));
  CHECK(waited >= 900ms);
  CHECK(waited < 8s);  // the whole head would take 10 s, each byte within --read-timeout
}

TEST_CASE("connections beyond --max-connections-per-peer are refused at once with 503",
          "[server][limits][door]") {
  server::HttpOptions o;
  o.max_connections_per_peer = 3;
  o.probe_connections = 0;  // no reserve for probes: refused at the accept
  LiveServer srv(o);
  std::vector<std::unique_ptr<RawConnection>> held;
  for (int i = 0; i < 3; ++i) held.push_back(std::make_unique<RawConnection>(srv.port(), 30));
  RawConnection extra(srv.port(), 30);
  const std::string refused = extra.read_all();
  CHECK(refused.rfind("HTTP/1.1 503", 0) == 0);
  CHECK(refused.find("--max-connections-per-peer") != std::string::npos);
  CHECK(srv.connections_cut("max_connections_per_peer") == 1);  // counted before the answer
  // One of the three closes: a new connection is served again (the door notices the close
  // within its poll round; retry for a while).
  held.pop_back();
  bool served = false;
  for (int i = 0; i < 50 && !served; ++i) {
    auto res = srv.client().Get("/healthz");
    served = res && res->status == 200;
    if (!served) std::this_thread::sleep_for(20ms);
  }
  CHECK(served);
}

TEST_CASE("connections beyond --max-connections are refused at once", "[server][limits][door]") {
  server::HttpOptions o;
  o.max_connections = 2;
  o.probe_connections = 0;  // no reserve for probes: refused at the accept
  LiveServer srv(o);
  RawConnection a(srv.port(), 30);
  RawConnection b(srv.port(), 30);
  RawConnection c(srv.port(), 30);
  CHECK(c.read_all().rfind("HTTP/1.1 503", 0) == 0);
  CHECK(srv.connections_cut("max_connections") == 1);
  CHECK(srv.connections_cut("max_connections_per_peer") == 0);
}

TEST_CASE("pipelined requests on one connection are answered in order through the door",
          "[server][door]") {
  LiveServer srv(one_worker());
  RawConnection conn(srv.port(), 30);
  REQUIRE(
      conn.send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
                "GET /version HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
  const std::string answers = conn.read_all();
  INFO(answers);
  const auto first = answers.find("ok\n");
  const auto second = answers.find("gapless-extender");
  CHECK(first != std::string::npos);
  CHECK(second != std::string::npos);
  CHECK(first < second);
}

TEST_CASE("door limit options are validated", "[server][limits][door]") {
  server::HttpOptions o;
  o.request_timeout = 0s;
  CHECK(LiveServer::bind_error(o).find("--request-timeout") != std::string::npos);
  o = {};
  o.max_connections = 0;
  CHECK(LiveServer::bind_error(o).find("--max-connections") != std::string::npos);
  o = {};
  o.max_connections_per_peer = 0;
  CHECK(LiveServer::bind_error(o).find("--max-connections-per-peer") != std::string::npos);
}

}  // namespace gapless::test
