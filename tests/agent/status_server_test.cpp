// The agent's HTTP port (StatusServer): /healthz, /readyz, /version and the Prometheus text on
// /metrics, served through the extender's door (issue 38 item 4): idle and slowloris clients
// cannot keep the kubelet's probe from an answer, huge heads are refused early, anything else
// is 404. Outcomes and counts are asserted; the clients' read bounds only end a test whose
// server wrongly holds on.
#include <sys/socket.h>

#include <httplib.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "gapless/agent/status_server.h"
#include "server/raw_connection.h"

using namespace gapless;
using test::RawConnection;

namespace {

constexpr int kReadBound = 20;  // seconds; far above every server deadline used here

// One request on its own connection; the whole answer (the server closes after it).
std::string ask(int port, const std::string& request_line) {
  RawConnection c(port, kReadBound);
  REQUIRE(c.send(request_line + "\r\nHost: x\r\nConnection: close\r\n\r\n"));
  return c.read_all();
}

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.rfind(prefix, 0) == 0;
}

// Whether the server still holds `c` open: nothing to read yet, and no end of stream.
bool still_open(RawConnection& c) {
  char byte = 0;
  return ::recv(c.fd(), &byte, 1, MSG_PEEK | MSG_DONTWAIT) < 0 && errno == EAGAIN;
}

// Open connections that never send a byte, and connections that send a head a byte at a time
// and never finish it (slowloris).
struct Attackers {
  Attackers(int port, int n) {
    for (int i = 0; i < n; ++i) idle.push_back(std::make_unique<RawConnection>(port, kReadBound));
    for (int i = 0; i < n; ++i) {
      slow.push_back(std::make_unique<RawConnection>(port, kReadBound));
      REQUIRE(slow.back()->send("GET /healthz HTTP/1.1\r\nHost: x\r\n"));
    }
    for (char byte : std::string("X-Slow")) {
      for (auto& c : slow) REQUIRE(c->send(std::string(1, byte)));
    }
  }
  std::vector<std::unique_ptr<RawConnection>> idle, slow;
};

}  // namespace

TEST_CASE("the status server answers /healthz, /readyz, /version and /metrics") {
  agent::AgentMetrics metrics;
  metrics.set_gpus(8, 1);
  metrics.count_xid(79);
  metrics.count_patch();
  agent::StatusServer server(metrics);
  REQUIRE(server.start("127.0.0.1:0").ok());
  httplib::Client client("127.0.0.1", server.port());
  auto health = client.Get("/healthz");
  REQUIRE(health);
  CHECK(health->status == 200);
  CHECK(health->body == "ok\n");
  auto ready = client.Get("/readyz");
  REQUIRE(ready);
  CHECK(ready->status == 200);
  auto version = client.Get("/version");
  REQUIRE(version);
  CHECK(version->status == 200);
  CHECK_THAT(version->body, Catch::Contains("\"name\":\"gapless-agent\""));
  auto m = client.Get("/metrics");
  REQUIRE(m);
  CHECK(m->status == 200);
  for (const char* line :
       {"gapless_agent_gpus 8", "gapless_agent_gpus_unhealthy 1",
        "gapless_agent_xid_errors_total{xid=\"79\"} 1", "gapless_agent_nvml_errors_total 0",
        "gapless_agent_annotation_patches_total 1"}) {
    CHECK_THAT(m->body, Catch::Contains(line));
  }
}

TEST_CASE("the status server answers 404 to anything but its probe routes") {
  agent::AgentMetrics metrics;
  agent::StatusServer server(metrics);
  REQUIRE(server.start("127.0.0.1:0").ok());
  for (const char* line : {"GET / HTTP/1.1", "GET /debug/state HTTP/1.1", "GET /filter HTTP/1.1",
                           "GET /healthz/x HTTP/1.1", "DELETE /metrics HTTP/1.1"}) {
    INFO(line);
    CHECK(starts_with(ask(server.port(), line), "HTTP/1.1 404"));
  }
  CHECK(starts_with(ask(server.port(), "GET /healthz HTTP/1.1"), "HTTP/1.1 200"));
}

TEST_CASE("the status server refuses a listen address it cannot use") {
  agent::AgentMetrics metrics;
  agent::StatusServer server(metrics);
  for (const char* bad : {"9400", ":9400", "127.0.0.1:x", "127.0.0.1:70000"}) {
    INFO(bad);
    CHECK_FALSE(server.start(bad).ok());
  }
}

// Issue 38: 200 idle or 200 one-byte-per-second connections kept cpp-httplib's threads, and the
// kubelet restarted a healthy agent. 24 of each: more than the door's worker and probe queue.
TEST_CASE("idle and slowloris connections do not keep /healthz from answering") {
  constexpr int kAttackers = 24;
  static_assert(kAttackers > door::Door::kProbeQueue);
  agent::AgentMetrics metrics;
  door::DoorOptions options = agent::StatusServer::default_options();
  REQUIRE(options.workers < kAttackers);
  options.max_connections_per_peer = 4 * kAttackers;  // every client here is 127.0.0.1

  SECTION("while they are all held open") {
    options.read_timeout = options.request_timeout = std::chrono::seconds(60);
    agent::StatusServer server(metrics, options);
    REQUIRE(server.start("127.0.0.1:0").ok());
    Attackers attackers(server.port(), kAttackers);
    for (int i = 0; i < 3; ++i) {
      CHECK(starts_with(ask(server.port(), "GET /healthz HTTP/1.1"), "HTTP/1.1 200"));
    }
    CHECK(starts_with(ask(server.port(), "GET /metrics HTTP/1.1"), "HTTP/1.1 200"));
    // Answered while the attackers still hold their connections (not after they were cut).
    int open = 0;
    for (auto* group : {&attackers.idle, &attackers.slow}) {
      for (auto& c : *group) open += still_open(*c) ? 1 : 0;
    }
    CHECK(open == 2 * kAttackers);
  }
  SECTION("and their deadlines give the slots back, counted") {
    options.read_timeout = options.request_timeout = std::chrono::seconds(1);
    agent::StatusServer server(metrics, options);
    REQUIRE(server.start("127.0.0.1:0").ok());
    Attackers attackers(server.port(), kAttackers);
    CHECK(starts_with(ask(server.port(), "GET /healthz HTTP/1.1"), "HTTP/1.1 200"));
    for (auto& c : attackers.slow) {
      bool closed = false;
      CHECK(starts_with(c->read_all(&closed), "HTTP/1.1 408"));
      CHECK(closed);
    }
    for (auto& c : attackers.idle) {
      bool closed = false;
      CHECK(c->read_all(&closed).empty());  // closed quietly
      CHECK(closed);
    }
    CHECK_THAT(
        metrics.serialize(),
        Catch::Contains("gapless_agent_http_connections_cut_total{reason=\"request_timeout\"} " +
                        std::to_string(kAttackers)));
  }
}

TEST_CASE("an 8 MB head is refused with 431 and closed; the server keeps serving") {
  agent::AgentMetrics metrics;
  agent::StatusServer server(metrics);
  REQUIRE(server.start("127.0.0.1:0").ok());
  RawConnection c(server.port(), kReadBound);
  REQUIRE(c.send("GET /healthz HTTP/1.1\r\nHost: x\r\n"));
  const std::string line = "X-Padding: " + std::string(100, 'a') + "\r\n";
  std::string block;
  while (block.size() < 64 * 1024) block += line;
  // Stops once the answer is there or a send fails (the server refused and closed).
  std::size_t sent = 0;
  char byte = 0;
  while (sent < 8u * 1024 * 1024 && c.send(block)) {
    sent += block.size();
    if (::recv(c.fd(), &byte, 1, MSG_PEEK | MSG_DONTWAIT) > 0) break;
  }
  bool closed = false;
  const std::string answer = c.read_all(&closed);
  INFO(answer.substr(0, 300));
  CHECK(starts_with(answer, "HTTP/1.1 431"));
  CHECK(closed);
  CHECK(starts_with(ask(server.port(), "GET /healthz HTTP/1.1"), "HTTP/1.1 200"));
}
