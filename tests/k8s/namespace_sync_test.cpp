// Namespaces' labels reach the engine through an informer on the (fake) API server, so a quota
// selecting namespaces by label follows relabelling: a namespace moves in and out of the quota
// while the usage stays what the model's pods hold.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <thread>

#include "eventually.h"
#include "fake_api_server.h"
#include "gapless/k8s/api_client.h"
#include "gapless/k8s/cluster_sync.h"
#include "gapless/k8s/namespace_sync.h"
#include "gapless/placement/scheduler.h"
#include "k8s_objects.h"

namespace gapless::k8s::testing {
namespace {

using test::eventually;
using test::FakeApiServer;

nlohmann::json namespace_object(const std::string& name, const model::Labels& labels) {
  nlohmann::json meta = {{"name", name}, {"labels", labels}};
  meta["labels"][model::kNamespaceNameLabel] = name;  // as the API server adds it
  return {{"metadata", meta}, {"status", {{"phase", "Active"}}}};
}

placement::Policy team_quota() {
  placement::Policy p = placement::builtin_policy();
  placement::Quota q;
  q.name = "team-a";
  q.namespace_selector = model::LabelSelector{{{"team", "a"}}, {}};
  q.limits[placement::QuotaResource::kWholeGpus] = 3;
  p.quotas.push_back(q);
  return p;
}

struct World {
  World() : sched(model::Cluster{}, team_quota()), sync(hooks()), api(server.client_config()) {
    sync.replace_nodes({topology_node("n1", 8)});
    sync.replace_pods({bound_pod(whole("u1", "n1", {0, 1}))});  // namespace ml holds 2 GPUs
  }
  ~World() {
    if (!informer) return;
    informer->stop();
    // An informer between two watches opens a new one: close until it has returned, or the
    // teardown waits for the watch timeout.
    while (!done) {
      server.close_watches();
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    thread.join();
  }

  ClusterSyncHooks hooks() {
    ClusterSyncHooks h;
    h.mutate = [this](const std::function<void(model::Cluster&)>& f) { sched.mutate(f); };
    return h;
  }
  void start() {
    NamespaceHooks h;
    h.replace = [this](auto all) { sched.set_namespaces(std::move(all)); };
    h.set = [this](const std::string& ns, model::Labels l) { sched.set_namespace(ns, l); };
    h.erase = [this](const std::string& ns) { sched.erase_namespace(ns); };
    InformerOptions o;
    o.path = "/api/v1/namespaces";
    informer = std::make_unique<Informer>(api, o, namespace_handlers(h));
    thread = std::thread([this] {
      informer->run();
      done = true;
    });
  }
  // Whether a pod of `ns` asking for `gpus` whole GPUs passes filter on n1.
  bool admits(const std::string& ns, int gpus) const {
    model::PodInfo pod;
    pod.ns = ns;
    pod.uid = "pending";
    model::GpuRequest req;
    req.kind = model::RequestKind::kWhole;
    req.whole = gpus;
    return sched.filter(*sched.policy(), pod, req, {"n1"}).passed.size() == 1;
  }
  void relabel(const std::string& ns, const std::string& team) {
    server.update_namespace(ns, [&](nlohmann::json& o) { o["metadata"]["labels"]["team"] = team; });
  }

  placement::Scheduler sched;
  ClusterSync sync;
  FakeApiServer server;
  ApiClient api;
  std::unique_ptr<Informer> informer;
  std::thread thread;
  std::atomic<bool> done{false};
};

}  // namespace

TEST_CASE("a relabelled namespace moves in and out of a selector quota",
          "[k8s][namespaces][quota]") {
  World w;
  w.server.add_namespace(namespace_object("ml", {{"team", "a"}}));
  w.server.add_namespace(namespace_object("ml2", {{"team", "a"}}));
  // Before the informer lists: ml is unknown, so not selected, and ml2 has the whole budget.
  CHECK(w.admits("ml2", 3));
  w.start();
  REQUIRE(eventually([&] { return w.informer->synced(); }));
  // Listed: ml's 2 GPUs count against team a for ml2 too.
  CHECK(w.admits("ml2", 1));
  CHECK_FALSE(w.admits("ml2", 2));

  w.relabel("ml", "b");  // out of team a: ml2 may take the 3
  REQUIRE(eventually([&] { return w.admits("ml2", 3); }));
  CHECK(w.admits("ml", 4));

  w.relabel("ml", "a");  // back in
  REQUIRE(eventually([&] { return !w.admits("ml2", 2); }));
  CHECK(w.admits("ml2", 1));

  w.server.delete_namespace("ml2");  // gone: selected no more
  REQUIRE(eventually([&] { return w.admits("ml2", 3); }));
  w.server.add_namespace(namespace_object("ml3", {{"team", "a"}}));  // a new one is selected
  REQUIRE(eventually([&] { return !w.admits("ml3", 2); }));
}

TEST_CASE("namespace labels: non-string values and objects without a name are skipped",
          "[k8s][namespaces]") {
  CHECK(object_labels(nlohmann::json::parse(
            R"({"metadata":{"labels":{"a":"1","b":2,"c":null,"d":{"x":"y"}}}})")) ==
        model::Labels{{"a", "1"}});
  CHECK(object_labels(nlohmann::json::parse(R"({"metadata":{"labels":"team=a"}})")).empty());
  CHECK(object_labels(nlohmann::json::parse("[1]")).empty());
  std::vector<std::string> seen;
  NamespaceHooks h;
  h.replace = [&](auto all) {
    for (const auto& [name, labels] : all) seen.push_back(name);
  };
  h.set = [&](const std::string& name, model::Labels) { seen.push_back("set " + name); };
  h.erase = [&](const std::string& name) { seen.push_back("erase " + name); };
  InformerHandlers handlers = namespace_handlers(h);
  handlers.on_list({nlohmann::json::parse(R"({"metadata":{}})"), namespace_object("x", {})});
  handlers.on_event("ADDED", nlohmann::json::parse(R"({"metadata":{"name":7}})"));
  handlers.on_event("MODIFIED", namespace_object("y", {}));
  handlers.on_event("DELETED", namespace_object("x", {}));
  handlers.on_event("BOOKMARK", namespace_object("z", {}));
  CHECK(seen == std::vector<std::string>{"x", "set y", "erase x"});
}

}  // namespace gapless::k8s::testing
