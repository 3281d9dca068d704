// UnboundPodStore: which pods the bind check may take from the pod informer (unbound_pods.h).
#include <catch2/catch.hpp>

#include "gapless/k8s/unbound_pods.h"
#include "k8s_objects.h"

using namespace gapless;
using nlohmann::json;

namespace {

json pending(const std::string& name, const std::string& uid) {
  json pod = k8s::testing::pod_object(name, uid, "");
  pod["spec"]["nodeSelector"] = {{"pool", "train"}};
  pod["spec"]["tolerations"] = {{{"key", "gpu"}, {"operator", "Exists"}}};
  return pod;
}

}  // namespace

TEST_CASE("unbound pods: kept with their requests and placement until bound or deleted",
          "[k8s][bind_trust]") {
  k8s::UnboundPodStore store;
  store.replace({pending("a", "uid-a"), k8s::testing::pod_object("bound", "uid-b", "n1")});
  CHECK(store.size() == 1);  // the bound pod is not kept
  CHECK_FALSE(store.find("ml", "bound"));

  auto a = store.find("ml", "a");
  REQUIRE(a);
  CHECK(a->pod.info.uid == "uid-a");
  CHECK(a->pod.info.node.empty());
  CHECK(a->pod.request.whole == 1);
  CHECK(a->placement.node_selector == std::map<std::string, std::string>{{"pool", "train"}});
  REQUIRE(a->placement.tolerations.size() == 1);
  CHECK(a->placement.tolerations[0].key == "gpu");
  CHECK_FALSE(store.find("other", "a"));  // namespaces are apart

  SECTION("an update replaces the copy; binding drops it") {
    json relabelled = pending("a", "uid-a");
    relabelled["spec"]["nodeSelector"]["pool"] = "infer";
    store.apply("MODIFIED", relabelled);
    CHECK(store.find("ml", "a")->placement.node_selector.at("pool") == "infer");
    json bound = pending("a", "uid-a");
    bound["spec"]["nodeName"] = "n1";
    store.apply("MODIFIED", bound);
    CHECK_FALSE(store.find("ml", "a"));
  }
  SECTION("deletion drops it; the same name created again is kept under its new UID") {
    store.apply("DELETED", pending("a", "uid-a"));
    CHECK_FALSE(store.find("ml", "a"));
    store.apply("ADDED", pending("a", "uid-a2"));
    CHECK(store.find("ml", "a")->pod.info.uid == "uid-a2");
  }
  SECTION("a pod whose requests cannot be read is not kept: bind reads it and says why") {
    json bad = pending("a", "uid-a");
    bad["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "8Gi";
    store.apply("MODIFIED", bad);
    CHECK_FALSE(store.find("ml", "a"));
  }
  SECTION("a relist keeps only what it lists") {
    store.replace({pending("c", "uid-c")});
    CHECK_FALSE(store.find("ml", "a"));
    CHECK(store.find("ml", "c"));
  }
  SECTION("objects without a name or UID are ignored") {
    store.apply("ADDED", json{{"metadata", {{"namespace", "ml"}}}});
    json no_uid = pending("d", "");
    store.apply("ADDED", no_uid);
    store.apply("ADDED", json("not an object"));
    CHECK(store.size() == 1);
  }
}

TEST_CASE("unbound pods: fed after the handlers it wraps", "[k8s][bind_trust]") {
  k8s::UnboundPodStore store;
  std::vector<std::string> seen;
  k8s::InformerHandlers inner;
  inner.on_list = [&](const std::vector<json>& items) {
    seen.push_back("list " + std::to_string(items.size()));
    CHECK(store.size() == 0);  // the model first
  };
  inner.on_event = [&](const std::string& type, const json&) {
    seen.push_back(type);
    CHECK_FALSE(store.find("ml", "b"));
  };
  k8s::InformerHandlers fed = store.feed(inner);
  fed.on_list({pending("a", "uid-a")});
  fed.on_event("ADDED", pending("b", "uid-b"));
  CHECK(seen == std::vector<std::string>{"list 1", "ADDED"});
  CHECK(store.size() == 2);
}
