// --max-answer-bytes refuses filter and prioritize answers before they are built (issue 38: a
// /filter naming 1.2M unknown nodes built its 68 MB answer in full, then refused it). The
// refusal uses a lower bound of the answer's size, so it never refuses an answer that fits.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "live_server.h"

namespace gapless::test {
namespace {

std::vector<std::string> unknown_names(int n) {
  std::vector<std::string> names;
  for (int i = 0; i < n; ++i) names.push_back("unknown-node-" + std::to_string(i));
  return names;
}

struct Fixture {
  server::Metrics metrics;
  server::InMemoryBinder binder;
  server::Extender extender{demo_cluster(), placement::builtin_policy(), binder, metrics};
};

std::string error_of(const std::string& answer) {
  const json j = json::parse(answer);
  return j.is_object() && j.contains("Error") ? j.at("Error").get<std::string>() : "";
}

bool refused_unbuilt(const std::string& answer) {
  const std::string e = error_of(answer);
  return e.find("at least") != std::string::npos &&
         e.find("--max-answer-bytes") != std::string::npos;
}

}  // namespace

TEST_CASE("a filter answer over --max-answer-bytes is refused before it is built",
          "[server][limits]") {
  Fixture f;
  const std::string body = extender_args(gpu_pod("p", "uid-p", 1), unknown_names(20000));
  const std::string full = f.extender.filter(body);
  REQUIRE(error_of(full).empty());
  REQUIRE(full.size() > 1000000);  // every unknown node with its reason

  const std::string refused = f.extender.filter(body, full.size() / 2);
  CHECK(refused_unbuilt(refused));
  CHECK(json::parse(refused).at("NodeNames").is_null());
  CHECK(refused.size() < 1024);
  // The bound is a lower bound: an answer that fits exactly is still built.
  CHECK(f.extender.filter(body, full.size()) == full);

  // Rejected nodes are listed only when none passed: with one node passing the answer is small.
  std::vector<std::string> names = unknown_names(20000);
  names.push_back("h100-nvs-01");
  const std::string passing =
      f.extender.filter(extender_args(gpu_pod("q", "uid-q", 1), names), 4096);
  CHECK(error_of(passing).empty());
  CHECK(json::parse(passing).at("NodeNames") == json::array({"h100-nvs-01"}));
}

TEST_CASE("a prioritize answer over --max-answer-bytes is refused before any node is scored",
          "[server][limits]") {
  Fixture f;
  const std::string body = extender_args(gpu_pod("p", "uid-p", 1), unknown_names(20000));
  const std::string full = f.extender.prioritize(body);
  REQUIRE(json::parse(full).is_array());
  CHECK(refused_unbuilt(f.extender.prioritize(body, full.size() / 2)));
  CHECK(f.extender.prioritize(body, full.size()) == full);
}

TEST_CASE("/filter over HTTP: an answer over --max-answer-bytes is an Error before it is built",
          "[server][limits]") {
  server::HttpOptions o;
  o.max_answer_bytes = 200 * 1024;
  LiveServer srv(o);
  const std::string body = extender_args(gpu_pod("p", "uid-p", 1), unknown_names(20000));
  auto res = srv.client().Post("/filter", body, "application/json");
  REQUIRE(res);
  CHECK(res->status == 200);
  CHECK(refused_unbuilt(res->body));
  auto small = srv.client().Post(
      "/filter", extender_args(gpu_pod("q", "uid-q", 1), {"h100-nvs-01"}), "application/json");
  REQUIRE(small);
  CHECK(json::parse(small->body).at("NodeNames") == json::array({"h100-nvs-01"}));
}

}  // namespace gapless::test
