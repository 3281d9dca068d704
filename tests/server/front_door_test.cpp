// The HTTP front against clients that frame requests badly or hold on: refused framing, body
// limits that hold for chunked bodies, any Content-Type taken as JSON, and connections closed at
// once where the server answers without serving (overflow lane, oversized bodies). Raw sockets,
// so the exact bytes on the wire are under the test's control.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

#include "live_server.h"
#include "raw_connection.h"

namespace gapless::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

const std::string kFilterBody = extender_args(gpu_pod("p", "uid-p", 1), {"h100-nvs-01"});

struct Answer {
  std::string text;  // status line, headers and body
  bool closed = false;
  Clock::duration took{};
  std::string body() const { return text.substr(text.find("\r\n\r\n") + 4); }
  std::string error() const { return json::parse(body()).at("Error"); }
};

// Sends `request` on a fresh connection and reads until the server closes it.
Answer exchange(int port, const std::string& request) {
  RawConnection c(port, 10);
  const auto t0 = Clock::now();
  REQUIRE(c.send(request));
  Answer a;
  a.text = c.read_all(&a.closed);
  a.took = Clock::now() - t0;
  return a;
}

std::string post(const std::string& path, const std::string& headers, const std::string& body) {
  return "POST " + path + " HTTP/1.1\r\nHost: x\r\n" + headers + "\r\n" + body;
}

std::string chunked(const std::string& body, std::size_t chunk) {
  std::string out;
  char size[32];
  for (std::size_t at = 0; at < body.size(); at += chunk) {
    const std::string piece = body.substr(at, chunk);
    std::snprintf(size, sizeof(size), "%zx\r\n", piece.size());
    out += size + piece + "\r\n";
  }
  return out + "0\r\n\r\n";
}

}  // namespace

TEST_CASE("two Content-Lengths, or Content-Length with chunked, are refused and closed",
          "[server][front-door]") {
  LiveServer srv({});
  const std::string cl = "Content-Length: " + std::to_string(kFilterBody.size()) + "\r\n";
  SECTION("two Content-Length headers, even equal ones") {
    const Answer a = exchange(srv.port(), post("/filter", cl + cl, kFilterBody));
    INFO(a.text);
    CHECK(a.text.rfind("HTTP/1.1 200", 0) == 0);
    CHECK(a.error().find("2 Content-Length headers") != std::string::npos);
    CHECK(a.closed);
  }
  SECTION("Content-Length and Transfer-Encoding: chunked") {
    const Answer a = exchange(srv.port(), post("/bind", cl + "Transfer-Encoding: chunked\r\n",
                                               chunked(kFilterBody, 100)));
    INFO(a.text);
    CHECK(a.error().find("both Content-Length and Transfer-Encoding") != std::string::npos);
    CHECK(a.closed);
  }
  SECTION("a verb without Content-Length or chunked: refused, not read until the client closes") {
    const Answer a = exchange(srv.port(), post("/filter", "", kFilterBody));
    INFO(a.text);
    CHECK(a.error().find("neither Content-Length nor Transfer-Encoding") != std::string::npos);
    CHECK(a.closed);
    CHECK(a.took < 5s);
  }
  SECTION("a Content-Length that is not a number; on other routes a 400") {
    const Answer a = exchange(srv.port(), post("/prioritize", "Content-Length: 12abc\r\n", ""));
    CHECK(a.error().find("not a number") != std::string::npos);
    const Answer b =
        exchange(srv.port(), "GET /healthz HTTP/1.1\r\nHost: x\r\n" + cl + cl + "\r\n");
    INFO(b.text);
    CHECK(b.text.rfind("HTTP/1.1 400", 0) == 0);
    CHECK(b.closed);
  }
  CHECK(srv.client().Get("/healthz"));
}

TEST_CASE("a chunked body over --max-body-bytes is cut off with an Error", "[server][front-door]") {
  server::HttpOptions options;
  options.max_body_bytes = 64 * 1024;
  LiveServer srv(options);
  const std::string te = "Transfer-Encoding: chunked\r\n";

  // Within the limit, chunked works as ever.
  const Answer ok =
      exchange(srv.port(), post("/filter", te + "Connection: close\r\n", chunked(kFilterBody, 50)));
  INFO(ok.text);
  CHECK(ok.error() == "");

  // 1 MB in 4 KB chunks: answered after the first 64 KiB, not read to the end.
  const std::string big = R"({"Pod":{},"x":")" + std::string(1024 * 1024, 'x') + "\"}";
  const Answer a = exchange(srv.port(), post("/filter", te, chunked(big, 4096)));
  INFO(a.text.substr(0, 500));
  CHECK(a.text.rfind("HTTP/1.1 200", 0) == 0);
  CHECK(a.error().find("exceeds the limit of 65536 bytes (--max-body-bytes)") != std::string::npos);
  CHECK(a.closed);

  // A chunked body to any other route is not read at all.
  const Answer other = exchange(srv.port(), post("/version", te, chunked(big, 4096)));
  CHECK(other.text.rfind("HTTP/1.1 404", 0) == 0);
  CHECK(other.closed);
  CHECK(srv.client().Get("/healthz"));
}

TEST_CASE("a declared Content-Length over the limit is answered at once, unread",
          "[server][front-door]") {
  LiveServer srv({});  // --read-timeout 30 s: waiting for the body would show
  const Answer a =
      exchange(srv.port(), post("/filter", "Content-Length: 100000000000\r\n", "{\"Pod\":"));
  INFO(a.text);
  CHECK(a.text.rfind("HTTP/1.1 200", 0) == 0);
  CHECK(a.error().find("exceeds the limit of 16777216 bytes") != std::string::npos);
  CHECK(a.closed);
  CHECK(a.took < 5s);

  // With "Expect: 100-continue", the client is not told to go ahead first.
  const Answer b = exchange(
      srv.port(), post("/filter", "Content-Length: 100000000000\r\nExpect: 100-continue\r\n", ""));
  INFO(b.text);
  CHECK(b.text.rfind("HTTP/1.1 200", 0) == 0);
  CHECK(b.error().find("--max-body-bytes") != std::string::npos);
  CHECK(b.closed);
}

TEST_CASE("a form-urlencoded body (curl -d) over 8 KB is read as the JSON it is",
          "[server][front-door]") {
  LiveServer srv({});
  json args = json::parse(kFilterBody);
  args["Padding"] = std::string(20000, 'x');
  auto res = srv.client().Post("/filter", args.dump(), "application/x-www-form-urlencoded");
  REQUIRE(res);
  INFO(res->body.substr(0, 300));
  CHECK(res->status == 200);
  const json r = json::parse(res->body);
  CHECK(r.at("Error") == "");
  CHECK(r.at("NodeNames") == json::array({"h100-nvs-01"}));
}

TEST_CASE("the overflow lane closes its connection right after the answer",
          "[server][front-door][overload]") {
  std::mutex mu;
  std::condition_variable cv;
  bool open = false;
  bool entered = false;
  server::HttpOptions options;
  options.workers = 1;
  options.max_queue = 0;
  options.before_handler = [&](const std::string& path) {
    if (path != "/filter") return;
    std::unique_lock lock(mu);
    entered = true;
    cv.notify_all();
    cv.wait(lock, [&] { return open; });
  };
  LiveServer srv(options);
  // Until the worker has started, a first call may itself land in the overflow lane: retry.
  std::jthread holder([&] {
    for (int i = 0; i < 1000; ++i) {
      {
        std::lock_guard lock(mu);
        if (entered) return;
      }
      srv.client().Post("/filter", kFilterBody, "application/json");
    }
  });
  struct Release {
    std::mutex& mu;
    std::condition_variable& cv;
    bool& open;
    ~Release() {
      std::lock_guard lock(mu);
      open = true;
      cv.notify_all();
    }
  } release{mu, cv, open};
  {
    std::unique_lock lock(mu);
    REQUIRE(cv.wait_for(lock, 20s, [&] { return entered; }));
  }
  // The probe is answered by the event loop itself, busy workers or not.
  const Answer probe =
      exchange(srv.port(), "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  INFO(probe.text);
  CHECK(probe.body() == "ok\n");
  CHECK(probe.closed);
  CHECK(probe.took < 2s);
  // Keep-alive requests (no "Connection: close"): the server must close anyway, at once.
  const std::string cl = "Content-Length: " + std::to_string(kFilterBody.size()) + "\r\n";
  const Answer verb = exchange(srv.port(), post("/filter", cl, kFilterBody));
  INFO(verb.text);
  CHECK(verb.error().rfind("overloaded: ", 0) == 0);
  CHECK(verb.closed);
  CHECK(verb.took < 2s);
  const Answer other = exchange(srv.port(), "GET /version HTTP/1.1\r\nHost: x\r\n\r\n");
  CHECK(other.text.rfind("HTTP/1.1 503", 0) == 0);
  CHECK(other.text.find("Retry-After: 1") != std::string::npos);
  CHECK(other.closed);
  CHECK(other.took < 2s);
}

}  // namespace gapless::test

namespace gapless::test {

TEST_CASE("pipelined requests on one connection are all answered, in order",
          "[server][front-door]") {
  LiveServer srv({});
  const std::string cl = "Content-Length: " + std::to_string(kFilterBody.size()) + "\r\n";
  // Three requests in one write, the last asking to close: httplib alone answered the first and
  // then waited 5 s for a request it had already read and dropped.
  const Answer a = exchange(srv.port(), "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n" +
                                            post("/filter", cl, kFilterBody) +
                                            "GET /version HTTP/1.1\r\nHost: x\r\n"
                                            "Connection: close\r\n\r\n");
  INFO(a.text);
  const auto first = a.text.find("HTTP/1.1 200");
  const auto second = a.text.find("HTTP/1.1 200", first + 1);
  const auto third = a.text.find("HTTP/1.1 200", second + 1);
  REQUIRE(third != std::string::npos);
  CHECK(a.text.find("ok\n") < second);
  CHECK(a.text.find("\"NodeNames\":[\"h100-nvs-01\"]") < third);
  CHECK(a.text.find("gapless-extender") > third);
  CHECK(a.closed);
  CHECK(a.took < 2s);
}

}  // namespace gapless::test
