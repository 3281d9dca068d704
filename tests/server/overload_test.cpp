// Limits of the HTTP front: the bounded worker pool answers at once when its queue is full
// (verbs: 200 with an "overloaded" Error, other routes 503) while health probes keep answering,
// overloads are counted, stop() works with busy workers and waiting connections without
// leaking descriptors, and the read timeout closes stalled connections.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <latch>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "gate.h"
#include "live_server.h"

namespace gapless::test {
namespace {

using namespace std::chrono_literals;

// A request made on its own thread; its answer (if any) is read after join().
struct Call {
  std::optional<int> status;
  std::string body;
  std::string error;
  std::jthread thread;
};

void start_post(Call& call, const LiveServer& srv, const std::string& path,
                const std::string& body) {
  call.thread = std::jthread([&call, &srv, path, body] {
    auto res = srv.client().Post(path.c_str(), body, "application/json");
    if (res) {
      call.status = res->status;
      call.body = res->body;
    } else {
      call.error = httplib::to_string(res.error());
    }
  });
}

const std::string kFilterBody = extender_args(gpu_pod("p", "uid-p", 1), {"h100-nvs-01"});

std::string overload_sample(const std::string& route) {
  return "gapless_http_overload_total{route=\"" + route + "\"} ";
}
// The counter's value for `route` in Prometheus text, or -1 if it has no sample.
double overload_count(server::Metrics& m, const std::string& route) {
  const std::string text = m.serialize();
  const std::string key = overload_sample(route);
  const auto at = text.find(key);
  return at == std::string::npos ? -1 : std::stod(text.substr(at + key.size()));
}

}  // namespace

TEST_CASE("a full queue answers at once: verbs with an overloaded Error, health probes still ok",
          "[server][overload]") {
  Gate gate;
  server::HttpOptions options;
  options.workers = 1;
  options.max_queue = 1;
  options.before_handler = [&gate](const std::string& path) {
    if (path == "/filter") gate.pass();
  };
  LiveServer srv(options);
  Call a, b;
  OpenOnExit opener{gate};

  // A holds the only worker; B waits in the queue, which is then full.
  start_post(a, srv, "/filter", kFilterBody);
  REQUIRE(eventually([&] { return gate.entered() == 1; }));
  start_post(b, srv, "/filter", kFilterBody);
  REQUIRE(eventually([&] { return srv.http().queued_connections() == 1; }));
  CHECK(srv.http().busy_workers() == 1);

  // Everything below is answered while A and B are still held: by the overflow lane.
  httplib::Client c = srv.client();
  for (const char* verb : {"/filter", "/prioritize", "/bind", "/preempt"}) {
    INFO(verb);
    const std::string body =
        std::string(verb) == "/bind" ? bind_args("p", "uid-p", "h100-nvs-01") : kFilterBody;
    auto res = c.Post(verb, body, "application/json");
    INFO(httplib::to_string(res.error()));
    REQUIRE(res);
    CHECK(res->status == 200);  // kube-scheduler reads only 200 bodies
    CHECK(res->get_header_value("Connection") == "close");
    const json r = json::parse(res->body);
    const std::string error = r.at("Error");
    CHECK(error.rfind("overloaded: ", 0) == 0);
    if (std::string(verb) == "/filter") {
      CHECK(keys_of(r) == std::set<std::string>{"Nodes", "NodeNames", "FailedNodes",
                                                "FailedAndUnresolvableNodes", "Error"});
      CHECK(r.at("NodeNames").is_null());
    }
  }
  for (const char* probe : {"/healthz", "/readyz"}) {
    INFO(probe);
    auto res = c.Get(probe);
    REQUIRE(res);
    CHECK(res->status == 200);
    CHECK(res->body == "ok\n");
  }
  // /metrics has its own reserved thread: scraped even now.
  auto scraped = c.Get("/metrics");
  REQUIRE(scraped);
  CHECK(scraped->status == 200);
  // /debug/state too, on the debug lane's thread: debug work never waits for the verbs' workers.
  auto state = c.Get("/debug/state");
  REQUIRE(state);
  CHECK(state->status == 200);
  auto version = c.Get("/version");
  REQUIRE(version);
  CHECK(version->status == 503);
  CHECK(version->get_header_value("Retry-After") == "1");
  CHECK(json::parse(version->body).at("Error").get<std::string>().rfind("overloaded: ", 0) == 0);
  CHECK(gate.entered() == 1);  // nothing above needed a worker
  CHECK_FALSE(a.status);
  CHECK_FALSE(b.status);
  for (const char* route : {"filter", "prioritize", "bind", "preempt", "/version"}) {
    INFO(route);
    CHECK(overload_count(srv.metrics(), route) == 1);
  }
  CHECK(srv.binder().bindings().empty());  // the refused bind did nothing

  // Released, A and B are answered in full.
  gate.open();
  a.thread.join();
  b.thread.join();
  for (Call* call : {&a, &b}) {
    INFO(call->error << " " << call->body);
    REQUIRE(call->status == 200);
    const json r = json::parse(call->body);
    CHECK(r.at("Error") == "");
    CHECK(r.at("NodeNames") == json::array({"h100-nvs-01"}));
  }
  // And with room again, requests are served normally.
  auto res = c.Post("/filter", kFilterBody, "application/json");
  REQUIRE(res);
  CHECK(json::parse(res->body).at("Error") == "");
  auto metrics = c.Get("/metrics");
  REQUIRE(metrics);
  CHECK(metrics->status == 200);
  CHECK(metrics->body.find(overload_sample("filter") + "1") != std::string::npos);
}

TEST_CASE("a request with a large body never holds the worker a normal request needs",
          "[server][overload]") {
  Gate gate;
  server::HttpOptions options;
  options.workers = 1;
  std::atomic<int> filters{0};
  options.before_handler = [&](const std::string& path) {
    if (path == "/filter" && filters++ == 0) gate.pass();  // the large one is held
  };
  LiveServer srv(options);
  Call large;
  OpenOnExit opener{gate};
  std::vector<std::string> unknown;
  for (int i = 0; i < 100000; ++i) unknown.push_back("unknown-node-" + std::to_string(i));
  const std::string large_body = extender_args(gpu_pod("big", "uid-big", 1), unknown);
  REQUIRE(large_body.size() > (std::size_t{1} << 20));  // the door's large-lane bound

  start_post(large, srv, "/filter", large_body);
  REQUIRE(eventually([&] { return gate.entered() == 1; }));
  CHECK(srv.http().busy_workers() == 0);  // it runs on the large lane, not on the one worker
  auto res = srv.client().Post("/filter", kFilterBody, "application/json");
  REQUIRE(res);  // before: queued behind the held worker until the read timeout
  CHECK(res->status == 200);
  CHECK(json::parse(res->body).at("NodeNames") == json::array({"h100-nvs-01"}));

  gate.open();
  large.thread.join();
  INFO(large.error);
  REQUIRE(large.status == 200);
  const json r = json::parse(large.body);
  CHECK(r.at("Error") == "");
  CHECK(r.at("NodeNames").empty());  // no such nodes
}

TEST_CASE("a flood of slow verb calls: every call gets an answer, probes stay ok",
          "[server][overload]") {
  server::HttpOptions options;
  options.workers = 2;
  options.max_queue = 2;
  options.before_handler = [](const std::string& path) {
    if (path == "/filter") std::this_thread::sleep_for(200ms);
  };
  LiveServer srv(options);
  constexpr int kVerbs = 24;
  constexpr int kProbes = 8;
  std::vector<std::string> answers(kVerbs + kProbes);
  std::latch start(kVerbs + kProbes);
  {
    std::vector<std::jthread> threads;
    for (int i = 0; i < kVerbs + kProbes; ++i) {
      threads.emplace_back([&, i] {
        httplib::Client c = srv.client();
        start.arrive_and_wait();
        auto res = i < kVerbs ? c.Post("/filter", kFilterBody, "application/json")
                              : c.Get(i % 2 ? "/healthz" : "/readyz");
        answers[i] = res ? std::to_string(res->status) + " " + res->body
                         : "no answer: " + httplib::to_string(res.error());
      });
    }
  }
  int served = 0;
  int overloaded = 0;
  for (int i = 0; i < kVerbs; ++i) {
    INFO(answers[i]);
    REQUIRE(answers[i].rfind("200 ", 0) == 0);
    const std::string error = json::parse(answers[i].substr(4)).at("Error");
    if (error.empty()) ++served;
    if (error.rfind("overloaded: ", 0) == 0) ++overloaded;
  }
  CHECK(served + overloaded == kVerbs);
  CHECK(served >= 1);
  CHECK(overloaded >= 1);  // 24 calls of 200 ms cannot all fit 2 workers and 2 places
  CHECK(overload_count(srv.metrics(), "filter") == overloaded);
  for (int i = kVerbs; i < kVerbs + kProbes; ++i) {
    INFO(answers[i]);
    CHECK(answers[i] == "200 ok\n");
  }
}

TEST_CASE("stop() with a busy worker and waiting connections: returns, leaks no descriptor",
          "[server][overload]") {
  // Warm up lazily opened descriptors (resolver, Catch2), then count.
  {
    LiveServer warm({});
    CHECK(warm.client().Get("/healthz"));
  }
  const int fds_before = open_fds();
  Gate gate;
  {
    server::HttpOptions options;
    options.workers = 1;
    options.max_queue = 2;
    options.before_handler = [&gate](const std::string& path) {
      if (path == "/filter") gate.pass();
    };
    LiveServer srv(options);
    Call a, b, c;
    OpenOnExit opener{gate};
    start_post(a, srv, "/filter", kFilterBody);
    REQUIRE(eventually([&] { return gate.entered() == 1; }));
    start_post(b, srv, "/filter", kFilterBody);
    start_post(c, srv, "/filter", kFilterBody);
    REQUIRE(eventually([&] { return srv.http().queued_connections() == 2; }));

    std::atomic<bool> stopped{false};
    std::jthread stopper([&] {
      srv.http().stop();
      stopped = true;
    });
    stopper.join();
    CHECK(stopped);
    gate.open();  // the request in progress finishes; the waiting ones are closed unanswered
    a.thread.join();
    b.thread.join();
    c.thread.join();
    INFO(a.error);
    CHECK(a.status == 200);
    CHECK_FALSE(b.status);
    CHECK_FALSE(c.status);
  }  // joins serve()
  CHECK(open_fds() == fds_before);
}

TEST_CASE("a connection that stalls mid-request is closed after --read-timeout",
          "[server][limits]") {
  server::HttpOptions options;
  options.read_timeout = std::chrono::seconds(1);
  LiveServer srv(options);

  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  timeval tv{60, 0};  // the test's own bound, far above the 1 s under test
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(srv.port()));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  // "Connection: close", so the server closes right after its answer instead of waiting 5 s
  // for a next request.
  const std::string partial =
      "POST /filter HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 1000\r\n\r\n{";
  REQUIRE(::send(fd, partial.data(), partial.size(), MSG_NOSIGNAL) ==
          static_cast<ssize_t>(partial.size()));
  const auto t0 = std::chrono::steady_clock::now();
  std::array<char, 4096> buf{};
  ssize_t n = 0;
  while ((n = ::recv(fd, buf.data(), buf.size(), 0)) > 0) {
  }
  const auto waited = std::chrono::steady_clock::now() - t0;
  ::close(fd);
  CHECK(n == 0);           // closed by the server, not our own 60 s bound
  CHECK(waited >= 500ms);  // not refused outright: the server did wait for the body
  CHECK(waited < 20s);     // and gave up long before the default 30 s
}

TEST_CASE("limit options are validated", "[server][limits]") {
  server::HttpOptions o;
  o.workers = 0;
  CHECK(LiveServer::bind_error(o).find("--workers") != std::string::npos);
  o = {};
  o.read_timeout = std::chrono::seconds(0);
  CHECK(LiveServer::bind_error(o).find("--read-timeout") != std::string::npos);
  o = {};
  o.write_timeout = std::chrono::seconds(-1);
  CHECK(LiveServer::bind_error(o).find("--write-timeout") != std::string::npos);
  o = {};
  o.max_queue = 0;  // no waiting at all is allowed
  CHECK(LiveServer::bind_error(o).empty());
  CHECK(server::default_workers() >= 4);
}

}  // namespace gapless::test
