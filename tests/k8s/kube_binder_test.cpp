#include "gapless/k8s/kube_binder.h"

#include <catch2/catch.hpp>

#include "scripted_transport.h"
#include "test_paths.h"

using gapless::Status;
using gapless::k8s::BindRequest;
using gapless::k8s::KubeBinder;
using gapless::k8s::testing::ScriptedTransport;
using nlohmann::json;

namespace {

const char* kRecord = R"({"v":1,"node":"gpu-h100-01","gpus":[{"index":2,"uuid":"GPU-c"}]})";

BindRequest request() {
  BindRequest r;
  r.ns = "ml-team";
  r.name = "llm-train-0";
  r.uid = "5d0c6f5e-3b0e-4c61-9f7e-2a8f3c1b7d42";
  r.node = "gpu-h100-01";
  r.annotations = {{"gapless.io/allocation", kRecord}};
  return r;
}

json fixture(const char* name) {
  return json::parse(gapless::test::fixture_text(std::string("extender/") + name));
}

// The same keys at every level, and the same value wherever the value is not an object.
void same_shape(const json& got, const json& want, const std::string& where = "") {
  INFO(where);
  REQUIRE(got.type() == want.type());
  if (!want.is_object()) return;
  std::vector<std::string> got_keys;
  std::vector<std::string> want_keys;
  for (const auto& [k, v] : got.items()) got_keys.push_back(k);
  for (const auto& [k, v] : want.items()) want_keys.push_back(k);
  CHECK(got_keys == want_keys);
  for (const auto& [k, v] : want.items()) {
    if (got.contains(k)) same_shape(got[k], v, where + "." + k);
  }
}

json pod_on(const std::string& node, const std::string& record) {
  return {{"metadata",
           {{"name", "llm-train-0"},
            {"namespace", "ml-team"},
            {"uid", "5d0c6f5e-3b0e-4c61-9f7e-2a8f3c1b7d42"},
            {"annotations", {{"gapless.io/allocation", record}}}}},
          {"spec", {{"nodeName", node}}}};
}

const char* kConflict =
    R"({"kind":"Status","apiVersion":"v1","status":"Failure","message":"pod llm-train-0 is )"
    R"(already assigned to node \"gpu-h100-02\"","reason":"Conflict","code":409})";

void check_event(const gapless::k8s::testing::Request& r, const std::string& message_part) {
  CHECK(r.method == "POST");
  CHECK(r.path == "/api/v1/namespaces/ml-team/events");
  const json e = json::parse(r.body);
  CHECK(e["kind"] == "Event");
  CHECK(e["apiVersion"] == "v1");
  CHECK(e["metadata"]["generateName"] == "llm-train-0.");
  CHECK(e["metadata"]["namespace"] == "ml-team");
  CHECK(e["involvedObject"] == json{{"kind", "Pod"},
                                    {"apiVersion", "v1"},
                                    {"namespace", "ml-team"},
                                    {"name", "llm-train-0"},
                                    {"uid", "5d0c6f5e-3b0e-4c61-9f7e-2a8f3c1b7d42"}});
  CHECK(e["reason"] == "FailedBinding");
  CHECK(e["type"] == "Warning");
  CHECK(e["source"]["component"] == "gapless-extender");
  CHECK(e["count"] == 1);
  const std::string ts = e["firstTimestamp"];
  CHECK(ts.size() == 20);
  CHECK(ts.back() == 'Z');
  CHECK(e["lastTimestamp"] == ts);
  CHECK(e["message"].get<std::string>().find(message_part) != std::string::npos);
}

}  // namespace

TEST_CASE("binder: the Binding has the shape of the protocol's example", "[k8s][binder]") {
  ScriptedTransport api;
  api.push_call(201, R"({"kind":"Status","apiVersion":"v1","status":"Success","code":201})");
  KubeBinder binder(api);
  Status s = binder.bind(request());
  CHECK(s.ok());
  auto calls = api.requests();
  REQUIRE(calls.size() == 1);
  CHECK(calls[0].method == "POST");
  CHECK(calls[0].path == "/api/v1/namespaces/ml-team/pods/llm-train-0/binding");
  const json body = json::parse(calls[0].body);
  json want = fixture("binding-body.json");
  want["metadata"]["annotations"] = {{"gapless.io/allocation", kRecord}};
  same_shape(body, want);
  CHECK(body == want);
}

TEST_CASE("binder: path segments are escaped", "[k8s][binder]") {
  ScriptedTransport api;
  api.push_call(201, "{}");
  BindRequest r = request();
  r.name = "a/b?c";
  CHECK(KubeBinder(api).bind(r).ok());
  CHECK(api.requests()[0].path == "/api/v1/namespaces/ml-team/pods/a%2Fb%3Fc/binding");
}

TEST_CASE("binder: 409 for the same node and record is a retry that succeeded", "[k8s][binder]") {
  ScriptedTransport api;
  api.push_call(409, kConflict);
  api.push_call(pod_on("gpu-h100-01", kRecord));
  KubeBinder binder(api);
  CHECK(binder.bind(request()).ok());
  auto calls = api.requests();
  REQUIRE(calls.size() == 2);
  CHECK(calls[1].method == "GET");
  CHECK(calls[1].path == "/api/v1/namespaces/ml-team/pods/llm-train-0");
}

TEST_CASE("binder: failures are errors and leave an Event on the pod", "[k8s][binder]") {
  ScriptedTransport api;
  std::string expect;
  std::size_t event_at = 1;
  SECTION("409: bound to another node") {
    api.push_call(409, kConflict);
    api.push_call(pod_on("gpu-h100-02", kRecord));
    expect = "already assigned to node \"gpu-h100-02\"";
    event_at = 2;
  }
  SECTION("409: same node, another record") {
    api.push_call(409, kConflict);
    api.push_call(pod_on("gpu-h100-01", R"({"v":1,"node":"gpu-h100-01","gpus":[{"index":5}]})"));
    expect = "HTTP 409";
    event_at = 2;
  }
  SECTION("409: the pod cannot be read") {
    api.push_call(409, kConflict);
    api.push_call(404,
                  R"({"kind":"Status","message":"pods \"llm-train-0\" not found","code":404})");
    expect = "HTTP 409";
    event_at = 2;
  }
  SECTION("500") {
    api.push_call(500, R"({"kind":"Status","message":"etcdserver: request timed out","code":500})");
    expect = "etcdserver: request timed out";
  }
  api.push_call(201, "{}");  // the Event
  Status s = KubeBinder(api).bind(request());
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().find(expect) != std::string::npos);
  auto calls = api.requests();
  REQUIRE(calls.size() == event_at + 1);
  check_event(calls[event_at], expect);
}

TEST_CASE("binder: a transport error is an error; a failing Event is ignored", "[k8s][binder]") {
  ScriptedTransport api;
  SECTION("transport error") {
    api.push_call_error("connection refused");
    Status s = KubeBinder(api).bind(request());
    REQUIRE_FALSE(s.ok());
    CHECK(s.error().find("connection refused") != std::string::npos);
    CHECK(api.requests().size() == 1);  // no Event against a server that does not answer
  }
  SECTION("the Event fails too") {
    api.push_call(500, "oops");
    api.push_call(403, "forbidden");
    Status s = KubeBinder(api).bind(request());
    REQUIRE_FALSE(s.ok());
    CHECK(s.error().find("500") != std::string::npos);
    CHECK(api.requests().size() == 2);
  }
}

TEST_CASE("binder: with success Events on, a bound pod gets a Normal Event naming its GPUs",
          "[k8s][binder]") {
  ScriptedTransport api;
  gapless::k8s::BindEvents events;
  events.on_success = true;
  events.burst = 2;
  events.per_second = 0.001;  // no refill within the test
  KubeBinder binder(api, "gapless-extender", events);
  for (int i = 0; i < 3; ++i) {
    api.push_call(201, "{}");  // the binding
    api.push_call(201, "{}");  // the Event, if one is posted
  }
  for (int i = 0; i < 3; ++i) CHECK(binder.bind(request()).ok());
  auto calls = api.requests();
  // Two binds with an Event each, then the limit: the third bind posts none.
  REQUIRE(calls.size() == 5);
  CHECK(calls[1].path == "/api/v1/namespaces/ml-team/events");
  const json e = json::parse(calls[1].body);
  CHECK(e["type"] == "Normal");
  CHECK(e["reason"] == "GaplessBound");
  CHECK(e["involvedObject"]["name"] == "llm-train-0");
  CHECK(e["message"].get<std::string>().find("node gpu-h100-01") != std::string::npos);
  CHECK(e["message"].get<std::string>().find("GPU 2 (GPU-c)") != std::string::npos);
  CHECK(calls[4].path.find("/binding") != std::string::npos);
}

TEST_CASE("binder: a fenced node's bad record leaves a Warning Event on its pod", "[k8s][binder]") {
  ScriptedTransport api;
  api.push_call(201, "{}");
  KubeBinder binder(api);
  binder.warn_fenced("ml", "bad", "n1", "GPU 12 does not exist");
  auto calls = api.requests();
  REQUIRE(calls.size() == 1);
  CHECK(calls[0].path == "/api/v1/namespaces/ml/events");
  const json e = json::parse(calls[0].body);
  CHECK(e["type"] == "Warning");
  CHECK(e["reason"] == "NodeFenced");
  CHECK(e["message"].get<std::string>().find("GPU 12 does not exist") != std::string::npos);
}
