// NodePublisher against the fake API server through the real ApiClient: merge patches on the
// Node's annotations, and none when the text did not change.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "fake_api_server.h"
#include "gapless/agent/node_publisher.h"
#include "gapless/agent/topology_annotation.h"

namespace {

using namespace gapless;
using nlohmann::json;

json gpu_node(const std::string& name) {
  return {{"metadata", {{"name", name}, {"annotations", {{"keep", "me"}}}}}};
}

std::string annotation_on(const test::FakeApiServer& api, const std::string& node) {
  auto n = api.node(node);
  REQUIRE(n);
  return (*n)["metadata"]["annotations"].value(agent::kTopologyAnnotation, "");
}

}  // namespace

TEST_CASE("the publisher patches only when the annotation text changes") {
  test::FakeApiServer api;
  api.add_node(gpu_node("gpu-1"));
  k8s::ApiClient client(api.client_config());
  agent::NodePublisher publisher(client, "gpu-1");

  auto first = publisher.publish(R"({"version":1,"gpus":[]})");
  REQUIRE(first.ok());
  CHECK(*first);
  CHECK(annotation_on(api, "gpu-1") == R"({"version":1,"gpus":[]})");
  CHECK((*api.node("gpu-1"))["metadata"]["annotations"]["keep"] == "me");  // a merge, not a put
  REQUIRE(api.requests().back().method == "PATCH");

  auto same = publisher.publish(R"({"version":1,"gpus":[]})");
  REQUIRE(same.ok());
  CHECK_FALSE(*same);
  CHECK(api.count_requests("PATCH", "/api/v1/nodes/gpu-1") == 1);

  auto changed = publisher.publish(R"({"version":1,"gpus":[],"links":[]})");
  REQUIRE(changed.ok());
  CHECK(*changed);
  CHECK(api.count_requests("PATCH", "/api/v1/nodes/gpu-1") == 2);

  SECTION("a restarted agent with the same text reads the Node and writes nothing") {
    agent::NodePublisher restarted(client, "gpu-1");
    auto again = restarted.publish(R"({"version":1,"gpus":[],"links":[]})");
    REQUIRE(again.ok());
    CHECK_FALSE(*again);
    CHECK(api.count_requests("PATCH", "/api/v1/nodes/gpu-1") == 2);
    CHECK(api.count_requests("GET", "/api/v1/nodes/gpu-1") == 2);
  }
}

TEST_CASE("a failed patch is an error and is sent again next time") {
  test::FakeApiServer api;
  api.add_node(gpu_node("gpu-1"));
  k8s::ApiClient client(api.client_config());
  agent::NodePublisher publisher(client, "gpu-1");
  api.fail_next("PATCH", "/api/v1/nodes/gpu-1", 1, 500, "etcd is sad");
  auto failed = publisher.publish("{}");
  REQUIRE_FALSE(failed.ok());
  CHECK_THAT(failed.error(), Catch::Contains("etcd is sad"));
  auto retried = publisher.publish("{}");
  REQUIRE(retried.ok());
  CHECK(*retried);
  CHECK(annotation_on(api, "gpu-1") == "{}");
}

TEST_CASE("publishing for a node the API server does not have is an error") {
  test::FakeApiServer api;
  k8s::ApiClient client(api.client_config());
  agent::NodePublisher publisher(client, "nowhere");
  auto r = publisher.publish("{}");
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.error(), Catch::Contains("404"));
  CHECK(api.count_requests("PATCH", "/api/v1/nodes") == 0);
}

TEST_CASE("the fake API server takes node merge patches only, and records them as changes") {
  test::FakeApiServer api;
  api.add_node(gpu_node("gpu-1"));
  const std::string before = api.resource_version();
  k8s::ApiClient client(api.client_config());
  auto json_patch = client.call("PATCH", "/api/v1/nodes/gpu-1", R"([{"op":"remove"}])",
                                "application/json-patch+json");
  REQUIRE(json_patch.ok());
  CHECK(json_patch->status == 415);
  CHECK(api.resource_version() == before);
  auto merge = client.call("PATCH", "/api/v1/nodes/gpu-1",
                           R"({"metadata":{"annotations":{"keep":null,"new":"x"}}})",
                           "application/merge-patch+json");
  REQUIRE(merge.ok());
  CHECK(merge->status == 200);
  CHECK(api.resource_version() != before);
  const json annotations = (*api.node("gpu-1"))["metadata"]["annotations"];
  CHECK(annotations == json{{"new", "x"}});  // null deletes, as RFC 7386 says
}
