// The fake API server itself: Kubernetes' shapes for binding, get, events, selectors, auth,
// faults, and the speed of large lists. (Watches are covered through ApiClient in
// api_client_test.cpp.)
#include "fake_api_server.h"

#include "gapless/k8s/api_client.h"

#include <httplib.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>
#include "test_paths.h"

using gapless::test::FakeApiServer;
using nlohmann::json;

namespace {

json pod(const std::string& ns, const std::string& name, const std::string& node = "",
         const std::string& phase = "Pending") {
  json p = {{"metadata", {{"name", name}, {"namespace", ns}, {"uid", "uid-" + name}}},
            {"spec", {{"containers", json::array({{{"name", "c"}}})}}},
            {"status", {{"phase", phase}}}};
  if (!node.empty()) p["spec"]["nodeName"] = node;
  return p;
}

json node(const std::string& name) {
  return {{"metadata", {{"name", name}}}};
}

struct Answer {
  int status;
  json body;
};

// Raw HTTP, so the server's exact answers are checked (not the client's view of them).
class Raw {
 public:
  explicit Raw(const FakeApiServer& s, std::string token = "") : cli_("127.0.0.1", s.port()) {
    if (!token.empty()) headers_.emplace("Authorization", "Bearer " + token);
    cli_.set_read_timeout(std::chrono::seconds(10));
  }
  Answer get(const std::string& path) { return answer(cli_.Get(path, headers_)); }
  Answer post(const std::string& path, const std::string& body) {
    return answer(cli_.Post(path, headers_, body, "application/json"));
  }

 private:
  static Answer answer(const httplib::Result& r) {
    REQUIRE(r);
    return {r->status, json::parse(r->body, nullptr, false)};
  }
  httplib::Client cli_;
  httplib::Headers headers_;
};

json binding_fixture() {
  return json::parse(gapless::test::fixture_text("extender/binding-body.json"));
}

std::vector<std::string> names(const json& list) {
  std::vector<std::string> out;
  for (const json& item : list["items"]) out.push_back(item["metadata"]["name"]);
  return out;
}

}  // namespace

TEST_CASE("fake API server: binding the fixture Binding sets node, annotations and condition") {
  FakeApiServer server;
  const json binding = binding_fixture();
  const std::string uid = binding["metadata"]["uid"];
  json p = pod("ml-team", "llm-train-0");
  p["metadata"]["uid"] = uid;
  p["metadata"]["annotations"] = {{"keep", "me"}};
  server.add_pod(p);
  Raw raw(server);
  const std::string path = "/api/v1/namespaces/ml-team/pods/llm-train-0/binding";
  const std::string before = server.resource_version();

  Answer a = raw.post(path, binding.dump());
  CHECK(a.status == 201);
  CHECK(a.body ==
        json::parse(R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Success",)"
                    R"("code":201})"));
  const json bound = server.pod("ml-team", "llm-train-0").value();
  CHECK(bound["spec"]["nodeName"] == "gpu-h100-01");
  CHECK(bound["metadata"]["annotations"]["keep"] == "me");
  CHECK(bound["metadata"]["annotations"]["example.com/gpu-indices"] == "2,3");
  CHECK(bound["metadata"]["resourceVersion"] != before);
  REQUIRE(bound["status"]["conditions"].size() == 1);
  CHECK(bound["status"]["conditions"][0]["type"] == "PodScheduled");
  CHECK(bound["status"]["conditions"][0]["status"] == "True");
  REQUIRE(server.bindings().size() == 1);
  CHECK(server.bindings()[0] == binding);

  // Bound already: 409 with the API server's message.
  a = raw.post(path, binding.dump());
  CHECK(a.status == 409);
  CHECK(a.body["kind"] == "Status");
  CHECK(a.body["status"] == "Failure");
  CHECK(a.body["reason"] == "Conflict");
  CHECK(a.body["code"] == 409);
  CHECK(a.body["message"] ==
        "Operation cannot be fulfilled on pods/binding \"llm-train-0\": pod llm-train-0 is "
        "already assigned to node \"gpu-h100-01\"");
  CHECK(a.body["details"] == json{{"name", "llm-train-0"}, {"kind", "pods/binding"}});
}

TEST_CASE("fake API server: binding refusals") {
  FakeApiServer server;
  server.add_pod(pod("ml", "p"));
  Raw raw(server);
  const std::string path = "/api/v1/namespaces/ml/pods/p/binding";
  auto bind_body = [](const std::string& name, const std::string& uid, const std::string& node) {
    json b = {{"kind", "Binding"},
              {"apiVersion", "v1"},
              {"metadata", {{"name", name}}},
              {"target", {{"kind", "Node"}, {"name", node}}}};
    if (!uid.empty()) b["metadata"]["uid"] = uid;
    return b.dump();
  };

  Answer a = raw.post(path, bind_body("other", "", "n1"));
  CHECK(a.status == 400);
  CHECK(a.body["message"] == "name in URL does not match name in Binding object");
  CHECK(a.body["reason"] == "BadRequest");

  a = raw.post(path, bind_body("p", "uid-someone-else", "n1"));
  CHECK(a.status == 409);
  CHECK_THAT(a.body["message"].get<std::string>(),
             Catch::Contains("Precondition failed: UID in precondition: uid-someone-else, UID "
                             "in object meta: uid-p"));

  a = raw.post(path, bind_body("p", "uid-p", ""));
  CHECK(a.status == 422);
  CHECK(a.body["reason"] == "Invalid");

  a = raw.post("/api/v1/namespaces/ml/pods/ghost/binding", bind_body("ghost", "", "n1"));
  CHECK(a.status == 404);
  CHECK(a.body["message"] == "pods \"ghost\" not found");

  a = raw.post(path, "{not json");
  CHECK(a.status == 400);

  server.update_pod("ml", "p",
                    [](json& p) { p["metadata"]["deletionTimestamp"] = "2025-01-15T09:12:45Z"; });
  a = raw.post(path, bind_body("p", "uid-p", "n1"));
  CHECK(a.status == 409);
  CHECK_THAT(a.body["message"].get<std::string>(), Catch::Contains("is being deleted"));
  CHECK(server.bindings().empty());
  CHECK_FALSE(server.pod("ml", "p")->at("spec").contains("nodeName"));

  // The test hook runs the same checks.
  server.add_pod(pod("ml", "q"));
  CHECK(server.bind_pod("ml", "q", "n2", {{"gapless.io/allocation", "{}"}}, "uid-q") == 201);
  CHECK(server.bind_pod("ml", "q", "n2") == 409);
  CHECK(server.bind_pod("ml", "nobody", "n2") == 404);
  CHECK(server.pod("ml", "q")->at("metadata").at("annotations").at("gapless.io/allocation") ==
        "{}");
}

TEST_CASE("fake API server: get one object, 404 Status for a missing one or an unknown path") {
  FakeApiServer server;
  server.add_node(node("n1"));
  server.add_pod(pod("ml", "p"));
  Raw raw(server);
  Answer a = raw.get("/api/v1/namespaces/ml/pods/p");
  CHECK(a.status == 200);
  CHECK(a.body["kind"] == "Pod");
  CHECK(a.body["apiVersion"] == "v1");
  CHECK(a.body["metadata"]["resourceVersion"] == server.resource_version());
  CHECK(a.body["metadata"].contains("creationTimestamp"));
  a = raw.get("/api/v1/nodes/n1");
  CHECK(a.status == 200);
  CHECK(a.body["kind"] == "Node");
  a = raw.get("/api/v1/namespaces/ml/pods/nope");
  CHECK(a.status == 404);
  CHECK(a.body == json::parse(R"({"kind":"Status","apiVersion":"v1","metadata":{},)"
                              R"("status":"Failure","message":"pods \"nope\" not found",)"
                              R"("reason":"NotFound","details":{"name":"nope","kind":"pods"},)"
                              R"("code":404})"));
  a = raw.get("/apis/apps/v1/deployments");
  CHECK(a.status == 404);
  CHECK(a.body["reason"] == "NotFound");
}

TEST_CASE("fake API server: field selectors on lists") {
  FakeApiServer server;
  server.add_pod(pod("ml", "a", "n1", "Running"));
  server.add_pod(pod("ml", "b", "n2", "Succeeded"));
  server.add_pod(pod("ml", "c", "", "Pending"));
  server.add_pod(pod("web", "d", "n1", "Failed"));
  Raw raw(server);
  auto list = [&](const std::string& query) {
    return names(raw.get("/api/v1/pods?" + query).body);
  };
  CHECK(list("") == std::vector<std::string>{"a", "b", "c", "d"});
  CHECK(list("fieldSelector=spec.nodeName%3Dn1") == std::vector<std::string>{"a", "d"});
  CHECK(list("fieldSelector=spec.nodeName%21%3D") == std::vector<std::string>{"a", "b", "d"});
  CHECK(list("fieldSelector=status.phase%21%3DSucceeded%2Cstatus.phase%21%3DFailed") ==
        std::vector<std::string>{"a", "c"});
  CHECK(list("fieldSelector=spec.nodeName%3D%3Dn1,metadata.namespace%3Dml") ==
        std::vector<std::string>{"a"});
  CHECK(names(raw.get("/api/v1/namespaces/web/pods").body) == std::vector<std::string>{"d"});
  const Answer bad = raw.get("/api/v1/pods?fieldSelector=spec.priority%3D1");
  CHECK(bad.status == 400);
  CHECK(bad.body["message"] == "field label not supported: spec.priority");
  const json nodes = raw.get("/api/v1/nodes?fieldSelector=spec.unschedulable%3Dfalse").body;
  CHECK(nodes["kind"] == "NodeList");
}

TEST_CASE("fake API server: events are recorded with a generated name") {
  FakeApiServer server;
  Raw raw(server);
  const json event = {{"apiVersion", "v1"},
                      {"kind", "Event"},
                      {"metadata", {{"generateName", "llm-train-0."}, {"namespace", "ml-team"}}},
                      {"involvedObject", {{"kind", "Pod"}, {"name", "llm-train-0"}}},
                      {"reason", "FailedBinding"},
                      {"type", "Warning"}};
  Answer a = raw.post("/api/v1/namespaces/ml-team/events", event.dump());
  CHECK(a.status == 201);
  CHECK_THAT(a.body["metadata"]["name"].get<std::string>(), Catch::StartsWith("llm-train-0."));
  REQUIRE(server.events().size() == 1);
  CHECK(server.events()[0]["reason"] == "FailedBinding");
  a = raw.post("/api/v1/namespaces/other/events", event.dump());
  CHECK(a.status == 400);
  CHECK(server.events().size() == 1);
}

TEST_CASE("fake API server: bearer token, rotation, faults, delays and the request log") {
  FakeApiServer server("t1");
  server.add_node(node("n1"));
  Answer a = Raw(server).get("/api/v1/nodes");
  CHECK(a.status == 401);
  CHECK(a.body["reason"] == "Unauthorized");
  CHECK(Raw(server, "t1").get("/api/v1/nodes").status == 200);
  server.set_token("t2");
  CHECK(Raw(server, "t1").get("/api/v1/nodes").status == 401);
  CHECK(Raw(server, "t2").get("/api/v1/nodes").status == 200);
  CHECK(server.client_config().token == "t2");

  server.fail_next("GET", "/api/v1/nodes", 2, 503, "etcd is sad");
  Raw raw(server, "t2");
  a = raw.get("/api/v1/nodes");
  CHECK(a.status == 503);
  CHECK(a.body["message"] == "etcd is sad");
  CHECK(a.body["reason"] == "ServiceUnavailable");
  CHECK(raw.get("/api/v1/nodes/n1").status == 503);
  CHECK(raw.get("/api/v1/nodes").status == 200);

  server.delay_next("GET", "/api/v1/nodes", 1, std::chrono::milliseconds(200));
  const auto start = std::chrono::steady_clock::now();
  CHECK(raw.get("/api/v1/nodes").status == 200);
  CHECK(std::chrono::steady_clock::now() - start >= std::chrono::milliseconds(200));

  CHECK(server.count_requests("GET", "/api/v1/nodes") == 8);
  CHECK(server.requests().back().target == "/api/v1/nodes");
  server.clear_log();
  CHECK(server.requests().empty());
}

TEST_CASE("fake API server: resourceVersions and object defaults") {
  FakeApiServer server;
  const std::string rv1 = server.add_pod({{"metadata", {{"name", "bare"}}}});
  const json bare = server.pod("default", "bare").value();
  CHECK(bare["metadata"]["namespace"] == "default");
  CHECK_FALSE(bare["metadata"]["uid"].get<std::string>().empty());
  CHECK(bare["metadata"]["resourceVersion"] == rv1);
  const std::string rv2 = server.update_pod("default", "bare", [](json&) {});
  CHECK(std::stoull(rv2) == std::stoull(rv1) + 1);
  CHECK(server.resource_version() == rv2);
  CHECK_THROWS_AS(server.add_pod({{"metadata", {{"name", "bare"}}}}), std::logic_error);
  CHECK_THROWS_AS(server.delete_node("nope"), std::logic_error);
  server.delete_pod("default", "bare");
  CHECK(server.pod_count() == 0);
}

TEST_CASE("fake API server: 5,000 nodes and 50,000 pods, listed whole and in chunks") {
  std::vector<json> nodes;
  std::vector<json> pods;
  for (int n = 0; n < 5000; ++n) {
    nodes.push_back({{"metadata",
                      {{"name", "node-" + std::to_string(n)},
                       {"labels", {{"nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"}}}}},
                     {"status", {{"allocatable", {{"nvidia.com/gpu", "8"}}}}}});
    for (int i = 0; i < 10; ++i) {
      pods.push_back(pod("ml", "pod-" + std::to_string(n) + "-" + std::to_string(i),
                         "node-" + std::to_string(n), "Running"));
    }
  }
  FakeApiServer server;
  auto start = std::chrono::steady_clock::now();
  server.load(nodes, pods);
  const auto load_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                           std::chrono::steady_clock::now() - start)
                           .count();
  CHECK(server.node_count() == 5000);
  CHECK(server.pod_count() == 50000);

  httplib::Client cli("127.0.0.1", server.port());
  gapless::k8s::ApiClient api(server.client_config());
  start = std::chrono::steady_clock::now();
  std::size_t items = 0;
  std::string cont;
  std::string rv;
  int pages = 0;
  do {
    auto r = api.call("GET", "/api/v1/pods?limit=500" + (cont.empty() ? "" : "&continue=" + cont),
                      "", "application/json");
    REQUIRE(r.ok());
    REQUIRE(r->status == 200);
    // Count items without parsing every pod: the list's metadata comes first.
    const json meta = json::parse(r->body.substr(0, r->body.find(",\"items\":[")) + "}");
    if (rv.empty()) rv = meta["metadata"]["resourceVersion"];
    CHECK(meta["metadata"]["resourceVersion"] == rv);
    cont = meta["metadata"].value("continue", "");
    ++pages;
    if (pages == 1) items = json::parse(r->body)["items"].size();
  } while (!cont.empty());
  const auto chunked_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                              std::chrono::steady_clock::now() - start)
                              .count();
  CHECK(pages == 100);
  CHECK(items == 500);

  start = std::chrono::steady_clock::now();
  auto whole = cli.Get("/api/v1/nodes");
  REQUIRE(whole);
  CHECK(json::parse(whole->body)["items"].size() == 5000);
  const auto nodes_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::steady_clock::now() - start)
                            .count();
  WARN("fake API server: load " << load_ms << " ms, 100 pod chunks through ApiClient " << chunked_ms
                                << " ms, 5000 nodes whole (parsed) " << nodes_ms << " ms");
  CHECK(chunked_ms < 5000);
}
