// filter (nodeCache mode) and prioritize read NodeNames and write their answers without a DOM
// (issue 12); these check that the text is byte for byte what nlohmann's dump() writes for the
// same values, names that need escaping included, and that NodeNames reads as before.
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

struct Fixture {
  server::Metrics metrics;
  server::InMemoryBinder binder;
  server::Extender extender{cluster_of(json::array({gfd_node("n1", 4), gfd_node("n2", 8)})),
                            placement::builtin_policy(), binder, metrics};
};

// Unknown names that need every kind of escape, and two real nodes, one too small for 8 GPUs.
const char* const kNames =
    R"(["n2","zz\"quote","a\\back","tab\there","ctl\u0001x","caf\u00e9","n1","del\u007f"])";

std::string body(const json& pod) {
  return "{\"Pod\":" + pod.dump() + ",\"NodeNames\":" + kNames + "}";
}

std::string dom_dump(const std::string& answer) {
  return json::parse(answer).dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace

TEST_CASE("filter's nodeCache answer is what dump() writes", "[server][wire]") {
  Fixture f;
  const std::string answer = f.extender.filter(body(gpu_pod("p", "uid-p", 8)));
  CHECK(answer == dom_dump(answer));
  const json r = json::parse(answer);
  CHECK(r.at("NodeNames") == json::array({"n2"}));
  CHECK(r.at("FailedNodes").empty());  // n1 has 4 GPUs: never fits an 8-GPU pod
  CHECK(r.at("FailedAndUnresolvableNodes").size() == 7);
  CHECK(r.at("FailedAndUnresolvableNodes").contains("zz\"quote"));
  CHECK(r.at("FailedAndUnresolvableNodes").contains("ctl\x01x"));
  CHECK(r.at("Nodes").is_null());
  CHECK(r.at("Error") == "");
}

TEST_CASE("prioritize's answer is what dump() writes, in input order", "[server][wire]") {
  Fixture f;
  const std::string answer = f.extender.prioritize(body(gpu_pod("p", "uid-p", 1)));
  CHECK(answer == dom_dump(answer));
  const json r = json::parse(answer);
  REQUIRE(r.size() == 8);
  CHECK(r.at(0).at("Host") == "n2");
  CHECK(r.at(1).at("Host") == "zz\"quote");
  CHECK(r.at(5).at("Host") == "caf\xc3\xa9");
}

TEST_CASE("NodeNames read straight into names: every shape reads as through the DOM",
          "[server][wire]") {
  Fixture f;
  const std::string pod = "{\"Pod\":" + gpu_pod("p", "uid-p", 1).dump() + ",";
  auto filter = [&](const std::string& rest) { return json::parse(f.extender.filter(pod + rest)); };
  CHECK(filter(R"("nodenames":["n1"]})").at("NodeNames") == json::array({"n1"}));
  CHECK(filter(R"("NodeNames":[]})").at("NodeNames") == json::array());
  for (const char* bad :
       {R"("NodeNames":["n1",1]})", R"("NodeNames":["n1",["n2"]]})", R"("NodeNames":[{"a":"n1"}]})",
        R"("NodeNames":"n1"})", R"("NodeNames":[null]})"}) {
    INFO(bad);
    CHECK(filter(bad).at("Error") == "NodeNames must be an array of node names");
  }
  // null: absent, so full mode's Nodes count.
  const json full = filter(R"("NodeNames":null,"Nodes":{"items":[{"metadata":{"name":"n1"}}]}})");
  CHECK(full.at("Error") == "");
  CHECK(full.at("Nodes").at("items").size() == 1);
  CHECK(filter(R"("NodeNames":["n1"],"nodeNames":["n2"]})")
            .at("Error")
            .get<std::string>()
            .find("duplicate key") != std::string::npos);
  // A NodeNames deeper down is no ExtenderArgs field and stays in the DOM.
  CHECK(filter(R"("x":{"NodeNames":[1]},"NodeNames":["n2"]})").at("NodeNames") ==
        json::array({"n2"}));
}

}  // namespace gapless::test
