// The bad-input table: malformed and hostile requests on every route. Each must get a clear
// answer (extender verbs: HTTP 200 with the reason in Error, or the node's reason where the
// protocol carries one; other routes: 4xx with a message), leave the model byte-identical
// (/debug/state), and leave the server serving.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "test_server.h"

namespace gapless::test {
namespace {

enum class Expect {
  kError,         // 200, Error contains `text`
  kUnresolvable,  // filter: 200, no Error, the node `node` unresolvable with `text` in its reason
  kNothing,       // filter: 200, no Error, no node passes (and none is rejected)
  kStatus,        // a non-verb route: this HTTP status, `text` in the body
};

struct BadCall {
  const char* what;
  const char* method;
  std::string path;
  std::string body;
  Expect expect;
  std::string text;
  int status = 200;
  std::string node = "ghost";  // kUnresolvable
};

std::string gpu_body(const json& limits) {
  return extender_args(pod("bad", "uid-bad", limits), {"h100-nvs-01"});
}
std::string with_pod(const json& pod_json) {
  return extender_args(pod_json, {"h100-nvs-01"});
}
std::string bind_body(const json& fields) {
  return fields.dump();
}
std::string nested(int depth) {
  return std::string(depth, '[') + std::string(depth, ']');
}

std::vector<BadCall> bad_calls() {
  const json ok = gpu_pod("p", "uid-p", 1);
  json ok_no_meta = ok;
  ok_no_meta.erase("metadata");
  json containers_object = ok;
  containers_object["spec"]["containers"] = json::object();
  json limits_list = ok;
  limits_list["spec"]["containers"][0]["resources"]["limits"] = json::array({1});
  json annotations_list = ok;
  annotations_list["metadata"]["annotations"] = json::array();
  const json bind_ok = {{"PodName", "held"},
                        {"PodNamespace", "default"},
                        {"PodUID", "uid-held"},
                        {"Node", "h100-nvs-01"}};
  auto bind_with = [&](const char* key, const json& value) {
    json b = bind_ok;
    b[key] = value;
    return b.dump();
  };
  return {
      // Not JSON, or not the JSON we need.
      {"truncated JSON", "POST", "/filter", R"({"Pod": {"metadata": )", Expect::kError,
       "malformed JSON"},
      {"empty body", "POST", "/filter", "", Expect::kError, "malformed JSON"},
      {"whitespace body", "POST", "/filter", " \n\t ", Expect::kError, "malformed JSON"},
      {"array body", "POST", "/filter", "[1,2,3]", Expect::kError, "JSON object"},
      {"string body", "POST", "/filter", "\"filter\"", Expect::kError, "JSON object"},
      {"null body", "POST", "/filter", "null", Expect::kError, "JSON object"},
      {"invalid UTF-8", "POST", "/filter", "{\"Pod\": \"\xff\xfe\"}", Expect::kError,
       "malformed JSON"},
      {"NUL byte inside a string", "POST", "/filter", std::string("{\"Pod\": \"a\0b\"}", 15),
       Expect::kError, "malformed JSON"},
      {"trailing garbage", "POST", "/filter", "{} {}", Expect::kError, "malformed JSON"},
      {"comments", "POST", "/filter", "{/* hi */}", Expect::kError, "malformed JSON"},
      {"nesting 100,000 deep", "POST", "/filter", nested(100000), Expect::kError, "nested"},
      {"duplicate Pod key", "POST", "/filter",
       R"({"Pod": )" + ok.dump() + R"(, "Pod": 7, "NodeNames": ["h100-nvs-01"]})", Expect::kError,
       "duplicate key"},
      {"Pod and pod (keys match case-insensitively)", "POST", "/filter",
       R"({"Pod": )" + ok.dump() + R"(, "pod": )" + ok.dump() + R"(, "NodeNames": []})",
       Expect::kError, "duplicate key"},
      // Wrong shapes and types.
      {"missing Pod", "POST", "/filter", json{{"NodeNames", json::array({"h100-nvs-01"})}}.dump(),
       Expect::kError, "Pod"},
      {"Pod a number", "POST", "/filter", json{{"Pod", 42}, {"NodeNames", json::array()}}.dump(),
       Expect::kError, "pod"},
      {"NodeNames a string", "POST", "/filter",
       json{{"Pod", ok}, {"NodeNames", "h100-nvs-01"}}.dump(), Expect::kError, "NodeNames"},
      {"NodeNames holding a number", "POST", "/filter",
       json{{"Pod", ok}, {"NodeNames", json::array({"h100-nvs-01", 5})}}.dump(), Expect::kError,
       "NodeNames"},
      {"Nodes a string", "POST", "/filter", json{{"Pod", ok}, {"Nodes", "h100-nvs-01"}}.dump(),
       Expect::kError, "Nodes"},
      {"Nodes items without names", "POST", "/filter",
       json{{"Pod", ok}, {"Nodes", {{"items", json::array({json::object()})}}}}.dump(),
       Expect::kError, "metadata.name"},
      {"metadata an array", "POST", "/filter",
       with_pod(json{{"metadata", json::array()}, {"spec", ok.at("spec")}}), Expect::kError,
       "metadata"},
      {"containers an object", "POST", "/filter", with_pod(containers_object), Expect::kError,
       "containers"},
      {"limits a list", "POST", "/filter", with_pod(limits_list), Expect::kError, "limits"},
      {"annotations a list", "POST", "/filter", with_pod(annotations_list), Expect::kError,
       "annotations"},
      // Quantities.
      {"negative GPU count", "POST", "/filter", gpu_body({{"nvidia.com/gpu", "-1"}}),
       Expect::kError, "-1"},
      {"GPU count 1e30", "POST", "/filter", gpu_body({{"nvidia.com/gpu", "1e30"}}), Expect::kError,
       "1e30"},
      {"GPU count past int64", "POST", "/filter",
       gpu_body({{"nvidia.com/gpu", "99999999999999999999999"}}), Expect::kError,
       "99999999999999999999999"},
      {"GPU count as a JSON number 2^70", "POST", "/filter",
       gpu_body({{"nvidia.com/gpu", 1180591620717411303424.0}}), Expect::kError, "nvidia.com/gpu"},
      {"fractional GPUs", "POST", "/filter", gpu_body({{"nvidia.com/gpu", "500m"}}), Expect::kError,
       "500m"},
      {"8Gi GPUs", "POST", "/filter", gpu_body({{"nvidia.com/gpu", "8Gi"}}), Expect::kError, "8Gi"},
      {"negative vRAM", "POST", "/filter", gpu_body({{"gapless.io/gpu-memory", "-1024"}}),
       Expect::kError, "-1024"},
      {"compute over 1000 milli", "POST", "/filter", gpu_body({{"gapless.io/gpu-compute", "1001"}}),
       Expect::kError, "1..1000"},
      {"shared count 0", "POST", "/filter",
       gpu_body({{"gapless.io/gpu-memory", "1024"}, {"gapless.io/gpu-shared-count", "0"}}),
       Expect::kError, "gpu-shared-count"},
      {"unknown gapless.io resource", "POST", "/filter", gpu_body({{"gapless.io/gpu-mem", "1024"}}),
       Expect::kError, "gapless.io/gpu-mem"},
      // A profile no GPU type in the table offers is a typo: the pod is refused, naming it.
      {"unknown MIG profile", "POST", "/filter", gpu_body({{"nvidia.com/mig-9g.99gb", "1"}}),
       Expect::kError, "unknown MIG profile 9g.99gb"},
      {"misspelled MIG profile", "POST", "/filter", gpu_body({{"nvidia.com/mig-1g.10gbb", "1"}}),
       Expect::kError, "unknown MIG profile 1g.10gbb"},
      {"preempt: misspelled MIG profile", "POST", "/preempt",
       json{{"Pod", pod("bad", "uid-bad", {{"nvidia.com/mig-1g.10gbb", "1"}})}}.dump(),
       Expect::kError, "1g.10gbb"},
      {"preempt: profile the policy lacks", "POST", "/preempt",
       json{{"Pod", gpu_pod("t", "uid-t", 1, {{"gapless.io/policy", "nope"}})}}.dump(),
       Expect::kError, "nope"},
      {"whole GPUs and MIG", "POST", "/filter",
       gpu_body({{"nvidia.com/gpu", "1"}, {"nvidia.com/mig-1g.10gb", "1"}}), Expect::kError,
       "nvidia.com/mig-1g.10gb"},
      {"bad topology annotation", "POST", "/filter",
       with_pod(gpu_pod("t", "uid-t", 2, {{"gapless.io/topology", "fast"}})), Expect::kError,
       "gapless.io/topology"},
      {"profile the policy lacks", "POST", "/filter",
       with_pod(gpu_pod("t", "uid-t", 1, {{"gapless.io/policy", "nope"}})), Expect::kError, "nope"},
      // Nodes.
      {"a node not in the inventory", "POST", "/filter", extender_args(ok, {"ghost"}),
       Expect::kUnresolvable, "inventory"},
      {"empty NodeNames", "POST", "/filter", extender_args(ok, {}), Expect::kNothing, ""},
      {"an empty node name", "POST", "/filter", extender_args(ok, {""}), Expect::kUnresolvable,
       "inventory", 200, ""},
      // Other verbs.
      {"prioritize: truncated JSON", "POST", "/prioritize", "{", Expect::kError, "malformed JSON"},
      {"prioritize: 8Gi GPUs", "POST", "/prioritize", gpu_body({{"nvidia.com/gpu", "8Gi"}}),
       Expect::kError, "8Gi"},
      {"prioritize: deep nesting", "POST", "/prioritize", nested(5000), Expect::kError, "nested"},
      {"bind: array body", "POST", "/bind", "[]", Expect::kError, "JSON object"},
      {"bind: PodUID a number", "POST", "/bind", bind_with("PodUID", 7), Expect::kError, "PodUID"},
      {"bind: empty Node", "POST", "/bind", bind_with("Node", ""), Expect::kError, "Node"},
      {"bind: missing Node", "POST", "/bind",
       json{{"PodName", "held"}, {"PodNamespace", "default"}, {"PodUID", "uid-held"}}.dump(),
       Expect::kError, "Node"},
      {"bind: a node not in the inventory", "POST", "/bind",
       bind_body(
           {{"PodName", "x"}, {"PodNamespace", "default"}, {"PodUID", "uid-x"}, {"Node", "ghost"}}),
       Expect::kError, "not seen by filter"},
      {"bind: the bound pod again, to another node", "POST", "/bind",
       bind_with("Node", "h100-nvs-02"), Expect::kError, "h100-nvs-01"},
      {"bind: a pod never filtered", "POST", "/bind",
       bind_body({{"PodName", "never"},
                  {"PodNamespace", "default"},
                  {"PodUID", "uid-never"},
                  {"Node", "h100-nvs-02"}}),
       Expect::kError, "never"},
      {"preempt: missing Pod", "POST", "/preempt", json{{"NodeNameToMetaVictims", nullptr}}.dump(),
       Expect::kError, "Pod"},
      {"preempt: truncated JSON", "POST", "/preempt", "nope", Expect::kError, "malformed JSON"},
      {"preempt: victims a string", "POST", "/preempt",
       json{{"Pod", ok}, {"NodeNameToMetaVictims", "all"}}.dump(), Expect::kError,
       "NodeNameToMetaVictims"},
      // Routes.
      {"an unknown verb", "POST", "/schedule", "{}", Expect::kStatus, "no route", 404},
      {"GET on a verb", "GET", "/filter", "", Expect::kStatus, "no route", 404},
      {"POST to /debug/state", "POST", "/debug/state", "{}", Expect::kStatus, "no route", 404},
      {"a path with .. in it", "GET", "/../debug/state", "", Expect::kStatus, "no route", 404},
  };
}

}  // namespace

TEST_CASE("the bad-input table: a clear answer, the model unchanged, still serving",
          "[server][http][bad-input]") {
  TestServer srv(demo_cluster());
  REQUIRE(srv.filter_and_bind(gpu_pod("held", "uid-held", 2), "h100-nvs-01") == "");
  const std::string before = srv.state();
  const auto calls = bad_calls();
  CHECK(calls.size() >= 40);

  for (const BadCall& c : calls) {
    INFO(c.what << ": " << c.method << " " << c.path << " " << c.body.substr(0, 300));
    auto cli = srv.client();
    auto res = std::string(c.method) == "GET"
                   ? cli.Get(c.path.c_str())
                   : cli.Post(c.path.c_str(), c.body, "application/json");
    REQUIRE(res);
    INFO("-> " << res->status << " " << res->body.substr(0, 500));
    if (c.expect == Expect::kStatus) {
      CHECK(res->status == c.status);
      CHECK(res->body.find(c.text) != std::string::npos);
    } else {
      CHECK(res->status == 200);
      const json r = json::parse(res->body, nullptr, false);
      REQUIRE(r.is_object());
      const std::string error = r.value("Error", "");
      if (c.expect == Expect::kError) {
        CHECK(error.find(c.text) != std::string::npos);
      } else {
        CHECK(error.empty());
        CHECK(r.at("NodeNames") == json::array());
        CHECK(r.at("FailedNodes").empty());
        const json& unresolvable = r.at("FailedAndUnresolvableNodes");
        if (c.expect == Expect::kUnresolvable) {
          REQUIRE(unresolvable.contains(c.node));
          CHECK(unresolvable.at(c.node).get<std::string>().find(c.text) != std::string::npos);
        } else {
          CHECK(unresolvable.empty());
        }
      }
      if (c.path == "/filter" && c.expect == Expect::kError) {
        CHECK(keys_of(r) == std::set<std::string>{"Nodes", "NodeNames", "FailedNodes",
                                                  "FailedAndUnresolvableNodes", "Error"});
        CHECK(r.at("NodeNames").is_null());
      }
    }
    CHECK(srv.state() == before);
    CHECK(srv.get("/healthz").status == 200);
  }
  // Still serving extender calls normally.
  CHECK(srv.call("/filter", extender_args(gpu_pod("p", "uid-p", 1), {"h100-nvs-02"}))
            .at("NodeNames") == json::array({"h100-nvs-02"}));
}

TEST_CASE("a 50 MB body: refused with an Error, the model unchanged, still serving",
          "[server][http][bad-input]") {
  TestServer srv(demo_cluster());  // the default --max-body-bytes, 16 MiB
  const std::string before = srv.state();
  const std::string body = R"({"Pod":{},"Padding":")" + std::string(50 * 1000 * 1000, 'x') + "\"}";
  for (const char* verb : {"/filter", "/bind"}) {
    auto res = srv.client().Post(verb, body, "application/json");
    // The server may answer before reading the whole body and close; either way, no crash.
    if (res) {
      INFO(verb << " -> " << res->status << " " << res->body.substr(0, 300));
      CHECK(res->status == 200);
      CHECK(json::parse(res->body, nullptr, false).value("Error", "").find("16777216") !=
            std::string::npos);
    }
    CHECK(srv.state() == before);
    CHECK(srv.get("/healthz").status == 200);
  }
}
}  // namespace gapless::test
