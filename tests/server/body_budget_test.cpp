// The large-body budget (include/gapless/door/body_budget.h, issue 17 "RSS bound"): bodies over 256
// KiB are parsed at most 2 x --max-body-bytes at a time whatever --workers is, a request that
// cannot get its share within --request-timeout is answered "overloaded" unparsed, and small
// bodies never wait for it.
#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

#include <vector>

#include "eventually.h"
#include "gapless/door/body_budget.h"
#include "gate.h"
#include "live_server.h"

namespace gapless::test {
namespace {

using namespace std::chrono_literals;

// A filter body of `size` bytes: the demo pod, padded with a long unknown string field.
std::string body_of(std::size_t size) {
  std::string body = extender_args(gpu_pod("p", "uid-p", 1), {"h100-nvs-01"});
  body.pop_back();  // the closing brace
  body += ",\"Pad\":\"";
  body += std::string(size - body.size() - 2, 'a');
  body += "\"}";
  return body;
}

}  // namespace

TEST_CASE("large bodies wait for the body budget; small ones and probes do not",
          "[server][limits][budget]") {
  Gate gate;
  server::HttpOptions o;
  o.workers = 6;
  o.max_body_bytes = 1024 * 1024;  // budget: 2 MiB, two maximal bodies
  o.request_timeout = 1s;          // how long a large body waits for the budget
  o.before_handler = [&gate](const std::string& path) {
    if (path == "/filter") gate.pass();
  };
  LiveServer srv(o);
  std::string big_answer[2];
  std::jthread holders[2];
  {
    OpenOnExit release{gate};
    for (int i = 0; i < 2; ++i) {
      holders[i] = std::jthread([&srv, &big_answer, i] {
        auto res = srv.client().Post("/filter", body_of(1024 * 1024), "application/json");
        if (res) big_answer[i] = res->body;
      });
    }
    REQUIRE(eventually([&] { return gate.entered() == 2; }));
    // The budget is full: a third large body is refused once its wait runs out, unparsed.
    auto third = srv.client().Post("/filter", body_of(512 * 1024), "application/json");
    INFO(httplib::to_string(third.error()));
    REQUIRE(third);
    CHECK(third->status == 200);
    CHECK(third->body.find("overloaded: large request bodies") != std::string::npos);
    // A small body needs no share of it (it reaches the gate like the others: not held here).
    auto small = srv.client().Post("/debug/explain", body_of(100 * 1024), "application/json");
    REQUIRE(small);
    CHECK(small->body.find("overloaded") == std::string::npos);
    auto health = srv.client().Get("/healthz");
    REQUIRE(health);
    CHECK(health->status == 200);
  }
  for (std::jthread& t : holders) t.join();
  for (const std::string& a : big_answer) CHECK(a.find("overloaded") == std::string::npos);
  // Released: a large body is handled again.
  gate.open();
  auto again = srv.client().Post("/filter", body_of(1024 * 1024), "application/json");
  REQUIRE(again);
  CHECK(again->body.find("overloaded") == std::string::npos);
}

// Freed heap goes back to the system at once only after growth beyond the budget (an attack's
// parse), otherwise once large bodies stop: a burst of full-node calls keeps its pages.
TEST_CASE("a lease trims at once only past the budget's growth, else the idle trimmer does",
          "[server][limits][budget]") {
  SECTION("grown past the capacity while the lease was held: trimmed as it ends") {
    door::BodyBudget budget(1024 * 1024, std::chrono::hours(1));    // capacity 2 MiB
    std::vector<char> parse(64 * 1024 * 1024);                      // outlives the lease
    {
      const auto lease = budget.acquire(512 * 1024, 0s);
      REQUIRE(lease.granted());
      for (std::size_t i = 0; i < parse.size(); i += 4096) parse[i] = 1;  // resident now
    }
    CHECK(budget.trims().at_release == 1);
    CHECK(budget.trims().when_idle == 0);
  }
  SECTION("within the capacity: left to the trimmer, which trims once idle") {
    door::BodyBudget budget(256 * 1024 * 1024, 20ms);  // capacity 512 MiB
    {
      const auto lease = budget.acquire(512 * 1024, 0s);
      REQUIRE(lease.granted());
    }
    CHECK(budget.trims().at_release == 0);
    CHECK(eventually([&] { return budget.trims().when_idle == 1; }));
  }
  SECTION("small bodies never leave anything to trim") {
    door::BodyBudget budget(1024 * 1024, 0ms);
    { const auto lease = budget.acquire(1024, 0s); }
    { const auto lease = budget.acquire(512 * 1024, 0s); }
    CHECK(eventually([&] { return budget.trims().when_idle == 1; }));
    { const auto lease = budget.acquire(1024, 0s); }
    CHECK(budget.trims().at_release == 0);
    CHECK(budget.trims().when_idle == 1);
  }
  SECTION("a large request freed after its lease (its answer written) is trimmed once idle") {
    door::BodyBudget budget(256 * 1024 * 1024, 20ms);
    { const auto lease = budget.acquire(512 * 1024, 0s); }
    CHECK(eventually([&] { return budget.trims().when_idle == 1; }));
    budget.note_freed();  // what a connection says once a large answer has been written
    CHECK(eventually([&] { return budget.trims().when_idle == 2; }));
    CHECK(budget.trims().at_release == 0);
  }
}

}  // namespace gapless::test
