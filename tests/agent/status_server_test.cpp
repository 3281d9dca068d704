// The agent's HTTP port: /healthz and the Prometheus text on /metrics.
#include <httplib.h>

#include <catch2/catch.hpp>

#include "gapless/agent/status_server.h"

using namespace gapless;

TEST_CASE("the status server answers /healthz and /metrics") {
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

TEST_CASE("the status server refuses a listen address it cannot use") {
  agent::AgentMetrics metrics;
  agent::StatusServer server(metrics);
  for (const char* bad : {"9400", ":9400", "127.0.0.1:x", "127.0.0.1:70000"}) {
    INFO(bad);
    CHECK_FALSE(server.start(bad).ok());
  }
}
