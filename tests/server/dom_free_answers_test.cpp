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

// The answer as nlohmann writes the same values in the same key order.
std::string dom_dump(const std::string& answer) {
  return nlohmann::ordered_json::parse(answer).dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace

TEST_CASE("filter's nodeCache answer is what dump() writes", "[server][wire]") {
  Fixture f;
  const std::string answer = f.extender.filter(body(gpu_pod("p", "uid-p", 8)));
  CHECK(answer == dom_dump(answer));
  const json r = json::parse(answer);
  CHECK(r.at("NodeNames") == json::array({"n2"}));
  // A node passed: kube-scheduler schedules the pod and reads no reasons, so none are sent.
  CHECK(r.at("FailedNodes").empty());
  CHECK(r.at("FailedAndUnresolvableNodes").empty());
  CHECK(r.at("Nodes").is_null());
  CHECK(r.at("Error") == "");

  // No node can take 16 GPUs: every node is listed, names escaped, in the request's order.
  const std::string none = f.extender.filter(body(gpu_pod("q", "uid-q", 16)));
  CHECK(none == dom_dump(none));
  const json n = json::parse(none);
  CHECK(n.at("NodeNames").empty());
  CHECK(n.at("FailedNodes").empty());  // too few GPUs even empty: unresolvable
  CHECK(n.at("FailedAndUnresolvableNodes").size() == 8);
  CHECK(n.at("FailedAndUnresolvableNodes").contains("zz\"quote"));
  CHECK(n.at("FailedAndUnresolvableNodes").contains("ctl\x01x"));
  std::vector<std::string> order;
  const auto ordered = nlohmann::ordered_json::parse(none);
  for (const auto& [name, why] : ordered.at("FailedAndUnresolvableNodes").items()) {
    order.push_back(name);
  }
  CHECK(order == std::vector<std::string>{"n2", "zz\"quote", "a\\back", "tab\there", "ctl\x01x",
                                          "caf\xc3\xa9", "n1", "del\x7f"});
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

namespace gapless::test {

// Full-node bodies go through simdjson (wire::read_full_node_args) when it takes them, and
// through the usual parser otherwise: both must answer alike.
TEST_CASE("full-node bodies: the passing items come back as they were sent, in input order",
          "[server][wire][full_node]") {
  Fixture f;
  const std::string pod = "{\"Pod\":" + gpu_pod("p", "uid-p", 8).dump() + ",";
  auto filter = [&](const std::string& rest) { return f.extender.filter(pod + rest); };
  // Keys out of alphabetical order, a number, escapes, a deep object Gapless never reads.
  const std::string n2 =
      R"({"metadata":{"name":"n2","labels":{"z":"1","a":"caf\u00e9 \"q\""}},"kind":"Node",)"
      R"("spec":{"podCIDR":"10.0.0.0/24"},"status":{"daemonEndpoints":{"kubeletEndpoint":)"
      R"({"Port":10250}}},"apiVersion":"v1"})";
  const std::string n1 = R"({"metadata":{"name":"n1"}})";
  const std::string answer =
      filter(R"("Nodes":{"items":[)" + n2 + "," + R"({"metadata":{"name":"gone"}},)" + n1 + "]}}");
  const json a = json::parse(answer);
  INFO(answer);
  CHECK(a.at("Error") == "");
  CHECK(a.at("NodeNames").is_null());
  // n1 has 4 GPUs: too small for 8. n2 passes; "gone" is unknown.
  REQUIRE(a.at("Nodes").at("items").size() == 1);
  CHECK(a.at("Nodes").at("items")[0] == json::parse(n2));
  CHECK(a.at("FailedAndUnresolvableNodes").empty());  // a node passed: no reasons sent
  // The item's keys keep their input order (metadata first, apiVersion last).
  CHECK(answer.find(R"({"metadata":{"name":"n2","labels":{"z":"1")") != std::string::npos);
  CHECK(answer.find(R"("apiVersion":"v1"})") != std::string::npos);
}

TEST_CASE("full-node bodies the fast reader declines get the usual answers",
          "[server][wire][full_node]") {
  Fixture f;
  const std::string pod = "{\"Pod\":" + gpu_pod("p", "uid-p", 1).dump() + ",";
  auto error = [&](const std::string& rest) {
    return json::parse(f.extender.filter(pod + rest)).at("Error").get<std::string>();
  };
  CHECK(error(R"("Nodes":{"items":[{"metadata":{}}]}})") == "Nodes.items[] needs metadata.name");
  CHECK(error(R"("Nodes":{"items":[{"metadata":{"name":5}}]}})") ==
        "Nodes.items[] needs metadata.name");
  CHECK(error(R"("Nodes":"n1"})") == "Nodes must be a NodeList with an items array");
  CHECK(error(R"("Nodes":{"items":{}}})") == "Nodes must be a NodeList with an items array");
  CHECK(error(R"("Nodes":{"items":[]},"nodes":{"items":[]}})").find("duplicate key") !=
        std::string::npos);
  CHECK(error(R"("Nodes":{"items":[{"metadata":{"name":"n1"}}]})").find("parse") !=
        std::string::npos);  // truncated
  // A pod checked as in nodeCache mode: a duplicate key inside it is refused.
  const std::string dup_pod =
      R"({"Pod":{"metadata":{"name":"p","name":"q"}},"Nodes":{"items":[]}})";
  CHECK(json::parse(f.extender.filter(dup_pod))
            .at("Error")
            .get<std::string>()
            .find("duplicate key") != std::string::npos);
  CHECK(error(R"("Nodes":{"items":[]}})") == "");
  CHECK(error(R"("Nodes":{}})") == "");
}

// The reader checks what it does not use without unescaping it (issue 12: a Node's annotations
// are JSON inside strings). A body malformed only there must still be refused as before.
TEST_CASE("full-node bodies malformed only where Gapless never reads are refused",
          "[server][wire][full_node]") {
  Fixture f;
  const std::string pod = "{\"Pod\":" + gpu_pod("p", "uid-p", 8).dump() + ",";
  auto filter = [&](const std::string& unread, const std::string& after = "") {
    return json::parse(f.extender.filter(pod + R"("Nodes":{"items":[{"metadata":{"name":"n2"},)" +
                                         R"("status":{"x":)" + unread + "}}]}}" + after));
  };
  for (const char* good : {R"("a\/b\\c\u00E9\n\t\"")", R"("")", R"("\\")",
                           R"("\ud83d\ude00\u20AC")", R"([1.5e3,-0,true,false,null,{}])"}) {
    INFO(good);
    const json a = filter(good);
    CHECK(a.at("Error") == "");
    CHECK(a.at("Nodes").at("items").size() == 1);
  }
  for (const char* bad : {R"("\q")",
                          R"("\u12g4")",
                          R"("\u12")",
                          R"("\ud800")",
                          R"("\udc00")",
                          R"("\ud800\u0041")",
                          R"("\ud800x")",
                          R"("a\x")",
                          "\"\x01\"",
                          "tru",
                          "nul",
                          "01",
                          "1.",
                          "-",
                          "\"\xff\"",
                          "[1,]",
                          "{\"a\":1,}",
                          R"({"a":"b":"c"})",
                          R"({"a":"b" "c":1})",
                          R"(["a" "b"])",
                          R"({"a":1:2})",
                          R"({"a":true "b":1})",
                          R"([null null])"}) {
    INFO(bad);
    const std::string error = filter(bad).at("Error").get<std::string>();
    CHECK(error.find("parse") != std::string::npos);
  }
  CHECK(filter("1", " x").at("Error").get<std::string>().find("parse") != std::string::npos);
  CHECK(filter("1", " {}").at("Error").get<std::string>().find("parse") != std::string::npos);
  CHECK(filter("1", "  \n").at("Error") == "");
}

// The HTTP server hands filter and prioritize the body in a std::string with 64 bytes spare
// behind it (front_door::read_body), which the fast reader parses in place: every answer must be
// the one the copying path gives.
TEST_CASE("a body parsed in place answers as a copied one", "[server][wire][full_node]") {
  Fixture f;
  const std::string pod = "{\"Pod\":" + gpu_pod("p", "uid-p", 8).dump() + ",";
  const std::vector<std::string> rests = {
      R"("Nodes":{"items":[{"metadata":{"name":"n2","labels":{"a":"caf\u00e9"}}},)"
      R"({"metadata":{"name":"n1"}}]}})",
      R"("NodeNames":["n1","n2","gone"]})",
      R"("Nodes":{"items":[{"metadata":{"name":"n2"},"x":"\q"}]}})",
      R"("Nodes":{"items":[{"metadata":{"name":"n2"}}]}} x)",
      R"("Nodes":{"items":[{"metadata":{"name":"n2"}})"};
  for (const std::string& rest : rests) {
    INFO(rest);
    std::string padded;
    padded.reserve(pod.size() + rest.size() + 64);
    padded += pod;  // appended into the reserved buffer (assigning a temporary would take its)
    padded += rest;
    REQUIRE(padded.capacity() >= padded.size() + 64);
    const std::string copied = pod + rest;
    CHECK(f.extender.filter(padded) == f.extender.filter(std::string_view(copied)));
    CHECK(f.extender.prioritize(padded) == f.extender.prioritize(std::string_view(copied)));
  }
}

}  // namespace gapless::test
