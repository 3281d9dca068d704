#include "gapless/k8s/pod_api.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

namespace gapless::k8s {
namespace {

using nlohmann::json;

TEST_CASE("pod Events: the binder's shape, and the agent's container and host", "[k8s][events]") {
  const json bind = json::parse(pod_event_json(PodEvent{.ns = "ml",
                                                        .name = "p",
                                                        .uid = "u1",
                                                        .type = "Normal",
                                                        .reason = "Scheduled",
                                                        .message = "ok",
                                                        .component = "gapless"}));
  CHECK(bind["metadata"] == json{{"generateName", "p."}, {"namespace", "ml"}});
  CHECK(bind["involvedObject"] == json{{"kind", "Pod"},
                                       {"apiVersion", "v1"},
                                       {"namespace", "ml"},
                                       {"name", "p"},
                                       {"uid", "u1"}});
  CHECK(bind["source"] == json{{"component", "gapless"}});
  CHECK_FALSE(bind.contains("reportingInstance"));
  CHECK(bind["type"] == "Normal");
  CHECK(bind["count"] == 1);
  CHECK(bind["firstTimestamp"] == bind["lastTimestamp"]);

  const json agent = json::parse(pod_event_json(PodEvent{.ns = "ml",
                                                         .name = "p",
                                                         .uid = "u1",
                                                         .field_path = "spec.containers{main}",
                                                         .reason = "GaplessDrift",
                                                         .message = "bad \xff byte",
                                                         .component = "gapless-agent",
                                                         .host = "node-a",
                                                         .name_suffix = "x-"}));
  CHECK(agent["metadata"]["generateName"] == "p.x-");
  CHECK(agent["involvedObject"]["fieldPath"] == "spec.containers{main}");
  CHECK(agent["source"] == json{{"component", "gapless-agent"}, {"host", "node-a"}});
  CHECK(agent["reportingInstance"] == "node-a");
  CHECK(agent["type"] == "Warning");
  CHECK(agent["message"] == "bad \xef\xbf\xbd byte");  // replaced, not an exception
}

}  // namespace
}  // namespace gapless::k8s
