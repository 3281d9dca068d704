// Issue 28, "two parsers disagree" and "heads and answers unbounded": each framing that RFC 9112
// lets a server refuse, and that cpp-httplib accepted (or read differently from a proxy), is
// refused with 400 (an extender verb: 200 with an Error) and the connection closed; a smuggled
// request inside is never run. Heads are bounded in bytes and fields, and /debug/explain refuses
// an answer it could not send. Raw sockets: the bytes on the wire are the test's.
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

// The reply to `request` sent on a fresh connection, read until the server closes it.
struct Reply {
  std::string text;
  bool closed = false;
  int status() const { return text.size() > 12 ? std::stoi(text.substr(9, 3)) : 0; }
  std::string body() const {
    const auto at = text.find("\r\n\r\n");
    return at == std::string::npos ? "" : text.substr(at + 4);
  }
};

Reply send_raw(int port, const std::string& request) {
  RawConnection c(port, 20);
  c.send(request);  // may fail part-way once the server refused and closed
  Reply r;
  r.text = c.read_all(&r.closed);
  return r;
}

// A bind the framing would smuggle in, if it were read as a second request.
const std::string kSmuggled = [] {
  const std::string body = bind_args("p", "uid-p", "h100-nvs-01");
  return "POST /bind HTTP/1.1\r\nHost: x\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\n\r\n" + body;
}();

// Refused: 400 (or 200 with an Error on a verb), closed, and nothing but one answer.
void check_refused(const Reply& r, const server::InMemoryBinder& binder) {
  INFO(r.text);
  const bool verb_error = r.status() == 200 && json::accept(r.body()) &&
                          !json::parse(r.body()).value("Error", "").empty();
  CHECK((r.status() == 400 || verb_error));
  CHECK(r.closed);
  CHECK(r.text.find("\nHTTP/1.1 ") == std::string::npos);  // one answer only
  CHECK(binder.bindings().empty());
}

}  // namespace

TEST_CASE("framing a proxy could read differently is refused and closed", "[server][framing]") {
  LiveServer srv({});
  const std::string te = "Transfer-Encoding: chunked\r\n";
  struct Case {
    const char* name;
    std::string request;
  };
  const std::vector<Case> cases = {
      {"whitespace before a colon",
       "POST /filter HTTP/1.1\r\nHost: x\r\nTransfer-Encoding : chunked\r\n\r\n0\r\n\r\n" +
           kSmuggled},
      {"NUL after chunked", "POST /filter HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked" +
                                std::string(1, '\0') + "\r\n\r\n0\r\n\r\n" + kSmuggled},
      {"Transfer-Encoding not exactly chunked",
       "POST /filter HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n" +
           kSmuggled},
      {"Transfer-Encoding xchunked",
       "POST /filter HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: xchunked\r\n\r\n" + kSmuggled},
      {"two Transfer-Encodings", "POST /filter HTTP/1.1\r\nHost: x\r\n" + te +
                                     "Transfer-Encoding: identity\r\n\r\n0\r\n\r\n"},
      {"Transfer-Encoding, then Content-Length",
       "POST /filter HTTP/1.1\r\nHost: x\r\n" + te + "Content-Length: 5\r\n\r\n0\r\n\r\n"},
      {"a Content-Length list",
       "POST /filter HTTP/1.1\r\nHost: x\r\nContent-Length: 2, 2\r\n\r\n{}"},
      {"chunk size 0x7",
       "POST /filter HTTP/1.1\r\nHost: x\r\n" + te + "0x7\r\n{\"a\":1}\r\n0\r\n\r\n"},
      {"chunk size +7",
       "POST /filter HTTP/1.1\r\nHost: x\r\n" + te + "+7\r\n{\"a\":1}\r\n0\r\n\r\n"},
      {"chunk size -7",
       "POST /filter HTTP/1.1\r\nHost: x\r\n" + te + "-7\r\n{\"a\":1}\r\n0\r\n\r\n"},
      {"chunk size with a space before",
       "POST /filter HTTP/1.1\r\nHost: x\r\n" + te + " 7\r\n{\"a\":1}\r\n0\r\n\r\n"},
      {"chunk data without its CRLF",
       "POST /filter HTTP/1.1\r\nHost: x\r\n" + te + "7\r\n{\"a\":1}X0\r\n\r\n"},
      {"obsolete line folding",
       "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Folded: a\r\n b\r\n\r\n" + kSmuggled},
      {"folding in a verb's head",
       "POST /bind HTTP/1.1\r\nHost: x\r\nX-A: 1\r\n\tContent-Length: 2\r\n\r\n{}"},
      {"a header line without a colon", "GET /healthz HTTP/1.1\r\nHost: x\r\nNoColon\r\n\r\n"},
      {"no Host in HTTP/1.1", "GET /healthz HTTP/1.1\r\n\r\n"},
      {"two Hosts", "GET /healthz HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n"},
      {"a NUL in a value",
       "GET /healthz HTTP/1.1\r\nHost: x\r\nX-A: a" + std::string(1, '\0') + "b\r\n\r\n"},
      {"a GET with a body that is a bind",
       "GET /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: " + std::to_string(kSmuggled.size()) +
           "\r\n\r\n" + kSmuggled},
      {"a GET with a chunked body", "GET /healthz HTTP/1.1\r\nHost: x\r\n" + te + "0\r\n\r\n"},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    check_refused(send_raw(srv.port(), c.request), srv.binder());
  }
  // A well-framed chunked request still works, and the server still serves.
  const std::string body = extender_args(gpu_pod("p", "uid-p", 1), {"h100-nvs-01"});
  char size[16];
  std::snprintf(size, sizeof(size), "%zx", body.size());
  const Reply ok =
      send_raw(srv.port(), "POST /filter HTTP/1.1\r\nHost: x\r\nConnection: close\r\n" + te +
                               "\r\n" + size + "\r\n" + body + "\r\n0\r\n\r\n");
  INFO(ok.text);
  CHECK(ok.status() == 200);
  CHECK(json::parse(ok.body()).at("Error") == "");
}

TEST_CASE("a head over --max-header-bytes or --max-headers is refused early and closed",
          "[server][framing][limits]") {
  LiveServer srv({});  // defaults: 64 KiB, 100 fields
  SECTION("64 MB of small headers: refused after 64 KiB, long before it is all sent") {
    RawConnection c(srv.port(), 20);
    REQUIRE(c.send("GET /healthz HTTP/1.1\r\nHost: x\r\n"));
    std::size_t sent = 0;
    const std::string line = "X-Padding: " + std::string(100, 'a') + "\r\n";
    std::string block;
    while (block.size() < 64 * 1024) block += line;
    // Stops at the first failed send: the server refused and closed.
    while (sent < 64u * 1024 * 1024 && c.send(block)) sent += block.size();
    bool closed = false;
    const std::string answer = c.read_all(&closed);
    INFO(answer.substr(0, 300));
    CHECK(sent < 64u * 1024 * 1024);
    CHECK(closed);
    if (!answer.empty()) CHECK(answer.rfind("HTTP/1.1 431", 0) == 0);
  }
  SECTION("a 100 KiB head is answered 431 with the flag named") {
    const Reply r = send_raw(srv.port(), "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " +
                                             std::string(100 * 1024, 'a') + "\r\n\r\n");
    INFO(r.text.substr(0, 300));
    CHECK(r.status() == 431);
    CHECK(r.body().find("--max-header-bytes") != std::string::npos);
    CHECK(r.closed);
  }
  SECTION("101 header fields") {
    std::string head = "GET /healthz HTTP/1.1\r\nHost: x\r\n";
    for (int i = 0; i < 100; ++i) head += "X-" + std::to_string(i) + ": 1\r\n";
    const Reply r = send_raw(srv.port(), head + "\r\n");
    INFO(r.text);
    CHECK(r.status() == 431);
    CHECK(r.body().find("--max-headers") != std::string::npos);
    CHECK(r.closed);
  }
  SECTION("a verb gets its 200 with an Error") {
    std::string head = "POST /filter HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n";
    for (int i = 0; i < 120; ++i) head += "X-" + std::to_string(i) + ": 1\r\n";
    const Reply r = send_raw(srv.port(), head + "\r\n{}");
    INFO(r.text);
    CHECK(r.status() == 200);
    CHECK(json::parse(r.body()).at("Error").get<std::string>().find("--max-headers") !=
          std::string::npos);
  }
  auto res = srv.client().Get("/healthz");
  REQUIRE(res);
  CHECK(res->status == 200);
}

TEST_CASE("/debug/explain with 1M node names is an Error, not a 64 MB answer",
          "[server][limits][explain]") {
  LiveServer srv({});  // --max-answer-bytes 16 MiB, --max-body-bytes 16 MiB
  std::vector<std::string> names;
  names.reserve(1000000);
  for (int i = 0; i < 1000000; ++i) names.push_back("n" + std::to_string(i));
  const std::string body = extender_args(gpu_pod("p", "uid-p", 1), names);
  REQUIRE(body.size() < 16u * 1024 * 1024);
  auto res = srv.client().Post("/debug/explain", body, "application/json");
  REQUIRE(res);
  CHECK(res->status == 200);
  CHECK(res->body.size() < 4096);
  const std::string error = json::parse(res->body).at("Error");
  CHECK(error.find("--max-answer-bytes") != std::string::npos);
  // A small explain is answered as ever.
  auto small =
      srv.client().Post("/debug/explain", extender_args(gpu_pod("p", "uid-p", 1), {"h100-nvs-01"}),
                        "application/json");
  REQUIRE(small);
  CHECK(small->body.find("h100-nvs-01") != std::string::npos);
}

TEST_CASE("an answer over --max-answer-bytes becomes an Error", "[server][limits]") {
  server::HttpOptions o;
  o.max_answer_bytes = 64;  // smaller than any filter answer
  LiveServer srv(o);
  auto res = srv.client().Post("/filter", extender_args(gpu_pod("p", "uid-p", 1), {"h100-nvs-01"}),
                               "application/json");
  REQUIRE(res);
  CHECK(res->status == 200);
  CHECK(json::parse(res->body).at("Error").get<std::string>().find("--max-answer-bytes") !=
        std::string::npos);
}

}  // namespace gapless::test
