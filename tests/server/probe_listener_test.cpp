// The probe listener (--probe-listen, HttpServer::bind_probes; issue 38 item 2): plain HTTP for
// the kubelet and Prometheus, serving GET /healthz, /readyz, /version and /metrics and nothing
// else (404: never a verb, /debug/* or /ui/*), with its own event loop and connection slots, so
// probes there answer while the main listener's slots are all taken. Outcomes are asserted;
// the clients' timeouts only end a test whose server wrongly waits.
#include <httplib.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <memory>
#include <string>
#include <vector>

#include "live_server.h"
#include "raw_connection.h"
#include "tls_support.h"

namespace gapless::test {
namespace {

const std::string kFilterBody = extender_args(gpu_pod("p", "uid-p", 1), {"h100-nvs-01"});

httplib::Client client_of(int port) {
  httplib::Client c("127.0.0.1", port);
  c.set_connection_timeout(10);
  c.set_read_timeout(20);
  c.set_write_timeout(20);
  return c;
}

}  // namespace

TEST_CASE("the probe listener answers the probes and /metrics, and 404 to anything else",
          "[server][probes][door]") {
  std::atomic<bool> ready{false};
  server::HttpOptions o;
  o.ready = [&ready] { return ready.load(); };
  LiveServer srv(o, demo_cluster(), /*probe_listener=*/true);
  REQUIRE(srv.probe_port() != 0);
  REQUIRE(srv.probe_port() != srv.port());
  auto probes = client_of(srv.probe_port());

  auto health = probes.Get("/healthz");
  REQUIRE(health);
  CHECK(health->status == 200);
  CHECK(health->body == "ok\n");
  auto not_ready = probes.Get("/readyz");
  REQUIRE(not_ready);
  CHECK(not_ready->status == 503);
  ready = true;
  auto now_ready = probes.Get("/readyz");
  REQUIRE(now_ready);
  CHECK(now_ready->status == 200);
  auto metrics = probes.Get("/metrics");
  REQUIRE(metrics);
  CHECK(metrics->status == 200);
  CHECK(metrics->body.find("gapless_") != std::string::npos);
  auto version = probes.Get("/version");
  REQUIRE(version);
  CHECK(version->status == 200);
  CHECK(json::parse(version->body).at("name") == "gapless-extender");

  for (const char* verb : {"/filter", "/prioritize", "/bind", "/preempt", "/debug/explain"}) {
    INFO(verb);
    auto res = client_of(srv.probe_port()).Post(verb, kFilterBody, "application/json");
    REQUIRE(res);
    CHECK(res->status == 404);
    CHECK(res->body.find("NodeNames") == std::string::npos);
  }
  for (const char* path : {"/debug/state", "/ui/", "/ui/index.html", "/ui/api/nodes"}) {
    INFO(path);
    auto res = client_of(srv.probe_port()).Get(path);
    REQUIRE(res);
    CHECK(res->status == 404);
  }
  CHECK(srv.binder().bindings().empty());

  // The main listener still serves everything.
  auto main = client_of(srv.port());
  auto state = main.Get("/debug/state");
  REQUIRE(state);
  CHECK(state->status == 200);
  auto filter = main.Post("/filter", kFilterBody, "application/json");
  REQUIRE(filter);
  CHECK(json::parse(filter->body).at("NodeNames") == json::array({"h100-nvs-01"}));
}

TEST_CASE("probes on the probe listener answer while the main listener's slots are all taken",
          "[server][probes][limits][door]") {
  server::HttpOptions o;
  o.max_connections = 4;
  o.probe_connections = 2;
  LiveServer srv(o, demo_cluster(), /*probe_listener=*/true);
  // Idle connections fill --max-connections and the probe reserve of the main listener.
  std::vector<std::unique_ptr<RawConnection>> flood;
  for (int i = 0; i < 6; ++i) flood.push_back(std::make_unique<RawConnection>(srv.port(), 20));
  RawConnection refused(srv.port(), 20);
  CHECK(refused.read_all().rfind("HTTP/1.1 503", 0) == 0);  // the main listener is full

  for (int i = 0; i < 3; ++i) {
    auto probes = client_of(srv.probe_port());
    auto health = probes.Get("/healthz");
    INFO(httplib::to_string(health.error()));
    REQUIRE(health);
    CHECK(health->status == 200);
    auto ready = probes.Get("/readyz");
    REQUIRE(ready);
    CHECK(ready->status == 200);
    auto metrics = probes.Get("/metrics");
    REQUIRE(metrics);
    CHECK(metrics->status == 200);
  }
}

TEST_CASE("the probe listener is plain HTTP beside an HTTPS main listener",
          "[server][probes][tls][door]") {
  const tls::Pki* pki = tls::pki_or_skip();
  if (pki == nullptr) return;
  LiveServer srv(tls::tls_options(*pki, /*client_ca=*/true), demo_cluster(),
                 /*probe_listener=*/true);
  auto health = client_of(srv.probe_port()).Get("/healthz");
  REQUIRE(health);
  CHECK(health->status == 200);
  // The main listener still requires TLS and a client certificate.
  auto plain = client_of(srv.port()).Get("/healthz");
  CHECK_FALSE(plain);
}

}  // namespace gapless::test
