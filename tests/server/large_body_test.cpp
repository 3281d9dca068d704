// Request bodies with many objects parse in linear time on every verb (issue 17, finding 2).
//
// No timing asserts: each case parses 200,000 objects, which took about 10 s per parse while the
// parse was quadratic (and minutes in a Debug build) and well under a second now. The ctest
// "server: linear parse" runs these cases under a TIMEOUT, so a quadratic parse fails there.
// The timings themselves are in bench/ (gapless-microbench --parse).
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <string>

#include "gapless/k8s/binder.h"
#include "gapless/placement/profile.h"
#include "gapless/server/extender.h"
#include "gapless/server/metrics.h"
#include "test_server.h"

namespace gapless::test {
namespace {

constexpr std::size_t kObjects = 200'000;

// {"<key>":[{},{},...]} with `n` empty objects, built as text (a DOM would be slower to build
// than the parse under test).
std::string many_objects(const std::string& key, std::size_t n) {
  std::string body = "{\"" + key + "\":[";
  body.reserve(body.size() + 3 * n + 2);
  for (std::size_t i = 0; i < n; ++i) body += i == 0 ? "{}" : ",{}";
  return body + "]}";
}

struct Fixture {
  server::Metrics metrics;
  server::InMemoryBinder binder;
  server::Extender extender{cluster_of(json::array({gfd_node("n1", 4)})),
                            placement::builtin_policy(), binder, metrics};
};

}  // namespace

TEST_CASE("every verb parses a body of 200,000 objects in linear time", "[server][linear]") {
  Fixture f;
  // Unknown keys are ignored: each verb parses the whole body, then answers about what it lacks.
  const std::string body = many_objects("x", kObjects);
  for (auto verb : {&server::Extender::filter, &server::Extender::prioritize,
                    &server::Extender::bind, &server::Extender::preempt}) {
    const std::string answer = (f.extender.*verb)(body);
    CHECK(answer.find("malformed JSON") == std::string::npos);
  }
}

TEST_CASE("200,000 Nodes.items without names are refused after a linear parse",
          "[server][linear]") {
  Fixture f;
  const std::string body = many_objects("Nodes\":{\"items", kObjects) + "}";
  // With a pod, filter reads every item's name; without one, it stops at the missing pod.
  const json r = json::parse(
      f.extender.filter("{\"Pod\":" + gpu_pod("p", "uid-p", 1).dump() + "," + body.substr(1)));
  CHECK(r.at("Error").get<std::string>().find("metadata.name") != std::string::npos);
}

TEST_CASE("duplicate keys are still refused, also deep in a large body", "[server][linear]") {
  Fixture f;
  std::string body = many_objects("x", kObjects);
  body.insert(body.size() - 2, ",{\"a\":1,\"A\":2}");
  const json r = json::parse(f.extender.filter(body));
  CHECK(r.at("Error").get<std::string>().find("duplicate key \"A\"") != std::string::npos);
}

}  // namespace gapless::test
