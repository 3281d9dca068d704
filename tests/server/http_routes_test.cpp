// The HTTP front (the bad-input table is in bad_input_test.cpp): oversized
// bodies, unknown routes, operational routes, the URL prefix, and server lifecycle.
#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <latch>
#include <string>
#include <thread>
#include <vector>

#include "test_server.h"

namespace gapless::test {
namespace {}  // namespace

TEST_CASE("a body over max_body_bytes: 200 with Error, server keeps serving", "[server][http]") {
  server::HttpOptions options;
  options.max_body_bytes = 4096;
  TestServer srv(demo_cluster(), placement::builtin_policy(), options);
  const std::string before = srv.state();

  json big = {{"Pod", gpu_pod("big", "uid-big", 1)},
              {"NodeNames", json::array({"h100-nvs-01"})},
              {"Padding", std::string(10 * 1024, 'x')}};
  for (const char* verb : {"/filter", "/bind"}) {
    httplib::Response res = srv.post(verb, big.dump());
    INFO(verb << " -> " << res.status << " " << res.body);
    CHECK(res.status == 200);
    const json r = json::parse(res.body, nullptr, false);
    REQUIRE(r.is_object());
    CHECK(r.value("Error", "").find("4096") != std::string::npos);
  }
  CHECK(srv.state() == before);
  CHECK(srv.get("/healthz").status == 200);
  big.erase("Padding");
  CHECK(srv.call("/filter", big.dump()).at("Error") == "");
}

TEST_CASE("operational routes", "[server][http]") {
  std::atomic<bool> ready{true};
  server::HttpOptions options;
  options.ready = [&ready] { return ready.load(); };
  TestServer srv(demo_cluster(), placement::builtin_policy(), options);

  CHECK(srv.get("/healthz").status == 200);
  CHECK(srv.get("/readyz").status == 200);
  ready = false;
  CHECK(srv.get("/readyz").status == 503);
  CHECK(srv.get("/healthz").status == 200);

  httplib::Response v = srv.get("/version");
  REQUIRE(v.status == 200);
  CHECK(v.get_header_value("Content-Type") == "application/json");
  const json version = json::parse(v.body);
  CHECK(version.at("name") == "gapless-extender");
  CHECK(version.at("version") == GAPLESS_VERSION);

  // Some traffic first, so every counter family has samples.
  REQUIRE(srv.filter_and_bind(gpu_pod("m", "uid-m", 1), "h100-nvs-01") == "");
  srv.call("/filter", extender_args(gpu_pod("m2", "uid-m2", 8), {"t4-01", "h100-nvs-01"}));
  httplib::Response m = srv.get("/metrics");
  REQUIRE(m.status == 200);
  for (const char* name :
       {"gapless_extender_requests_total", "gapless_extender_request_duration_seconds",
        "gapless_filter_rejections_total", "gapless_binds_total", "gapless_cluster_gpus"}) {
    INFO(name);
    CHECK(m.body.find(std::string("\n") + name) != std::string::npos);
  }
  CHECK(m.body.find(R"(gapless_binds_total{outcome="success"} 1)") != std::string::npos);

  for (const char* path : {"/nope", "/filterx", "/debug"}) {
    INFO(path);
    CHECK(srv.get(path).status == 404);
    CHECK(srv.post(path, "{}").status == 404);
  }
}

TEST_CASE("url prefix: verbs under the prefix only, operational routes at the root",
          "[server][http]") {
  server::HttpOptions options;
  options.url_prefix = "/gpu/";
  options.max_body_bytes = 4096;
  TestServer srv(demo_cluster(), placement::builtin_policy(), options);
  const std::string body = extender_args(gpu_pod("p", "uid-p", 1), {"h100-nvs-01"});

  CHECK(srv.call("/gpu/filter", body).at("NodeNames") == json::array({"h100-nvs-01"}));
  CHECK(srv.call("/gpu/prioritize", body).is_array());
  CHECK(srv.call("/gpu/bind", bind_args("p", "uid-p", "h100-nvs-01")).at("Error") == "");
  CHECK(srv.call("/gpu/preempt", json{{"Pod", gpu_pod("p", "uid-p", 1)}}.dump())
            .contains("NodeNameToMetaVictims"));
  for (const char* path : {"/filter", "/prioritize", "/bind", "/preempt", "/gpu//filter"}) {
    INFO(path);
    CHECK(srv.post(path, body).status == 404);
  }
  // Oversized bodies on a prefixed verb still answer 200 with Error.
  httplib::Response res = srv.post("/gpu/filter", std::string(8192, ' ') + body);
  CHECK(res.status == 200);
  CHECK(json::parse(res.body).value("Error", "") != "");
  CHECK(srv.get("/healthz").status == 200);
  CHECK(srv.get("/debug/state").status == 200);
}

TEST_CASE("normalize_prefix", "[server][http]") {
  CHECK(server::normalize_prefix("") == "");
  CHECK(server::normalize_prefix("/") == "");
  CHECK(server::normalize_prefix("gpu/") == "/gpu");
  CHECK(server::normalize_prefix("/gpu//") == "/gpu");
  CHECK(server::normalize_prefix("/a/b") == "/a/b");
}

TEST_CASE("stop() before serve() is not lost", "[server][http]") {
  server::Metrics metrics;
  server::InMemoryBinder binder;
  server::Extender extender(cluster_of(json::array({gfd_node("n", 1)})),
                            placement::builtin_policy(), binder, metrics);
  server::HttpServer http(extender, {});
  REQUIRE(http.bind("127.0.0.1", 0).ok());
  http.stop();  // e.g. SIGTERM between bind() and serve()
  std::atomic<bool> done{false};
  std::thread t([&] {
    http.serve();
    done = true;
  });
  for (int i = 0; i < 200 && !done; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  const bool returned = done;
  while (!done) {  // rescue, so a failure does not hang the suite
    http.stop();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  t.join();
  CHECK(returned);
}

TEST_CASE("a port already served is refused, not shared", "[server][http]") {
  TestServer first(cluster_of(json::array({gfd_node("n", 1)})));
  server::Metrics metrics;
  server::InMemoryBinder binder;
  server::Extender extender(cluster_of(json::array({gfd_node("n", 1)})),
                            placement::builtin_policy(), binder, metrics);
  server::HttpServer second(extender, {});
  auto bound = second.bind("127.0.0.1", first.port());
  CHECK_FALSE(bound.ok());
  if (!bound) CHECK(bound.error().find(std::to_string(first.port())) != std::string::npos);
}

TEST_CASE("a burst of 64 new connections is answered in full", "[server][http]") {
  TestServer srv(cluster_of(json::array({gfd_node("n", 1)})));
  constexpr int kClients = 64;
  std::vector<int> status(kClients, 0);
  std::latch start(kClients);
  std::vector<std::thread> threads;
  for (int i = 0; i < kClients; ++i) {
    threads.emplace_back([&, i] {
      httplib::Client c = srv.client();
      start.arrive_and_wait();
      if (auto res = c.Get("/healthz")) status[i] = res->status;
    });
  }
  for (std::thread& t : threads) t.join();
  CHECK(std::count(status.begin(), status.end(), 200) == kClients);
}

}  // namespace gapless::test
