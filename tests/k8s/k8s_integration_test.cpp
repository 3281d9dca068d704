// Informers, ClusterSync and KubeBinder over HTTP, with the real ApiClient against the fake API
// server (tests/support/fake_api_server.h). The support library puts that header on the include
// path; without it (a checkout that lacks tests/support) this file compiles to nothing.
#if __has_include("fake_api_server.h")
#include <catch2/catch.hpp>

#include <iostream>
#include <memory>
#include <thread>

#include "fake_api_server.h"
#include "gapless/k8s/api_client.h"
#include "gapless/k8s/cluster_sync.h"
#include "gapless/k8s/informer.h"
#include "gapless/k8s/kube_binder.h"
#include "k8s_objects.h"
#include "scripted_transport.h"

using gapless::Status;
using gapless::k8s::ApiClient;
using gapless::k8s::BindRequest;
using gapless::k8s::ClusterSync;
using gapless::k8s::ClusterSyncHooks;
using gapless::k8s::encode_allocation_record;
using gapless::k8s::Informer;
using gapless::k8s::InformerOptions;
using gapless::k8s::KubeBinder;
using gapless::k8s::testing::bound_pod;
using gapless::k8s::testing::eventually;
using gapless::k8s::testing::pod_object;
using gapless::k8s::testing::topology_node;
using gapless::k8s::testing::whole;
using gapless::model::Allocation;
using gapless::model::Cluster;
using gapless::test::FakeApiServer;
using nlohmann::json;
using namespace std::chrono_literals;

namespace {

// The extender's side: a guarded model kept in step by two informers over a real ApiClient.
class Live {
 public:
  explicit Live(FakeApiServer& server) : server_(server), client_(server.client_config()) {}
  ~Live() { stop(); }

  void start(int page_size = 500) {
    InformerOptions o;
    o.page_size = page_size;
    o.watch_timeout_seconds = 60;
    o.backoff_initial = 20ms;
    o.backoff_max = 200ms;
    o.path = "/api/v1/nodes";
    nodes_ = std::make_unique<Informer>(client_, o, sync_.node_handlers());
    o.path = "/api/v1/pods";
    o.field_selector = "status.phase!=Succeeded,status.phase!=Failed";
    pods_ = std::make_unique<Informer>(client_, o, sync_.pod_handlers());
    threads_.emplace_back([this] { nodes_->run(); });
    threads_.emplace_back([this] { pods_->run(); });
  }
  void stop() {
    if (threads_.empty()) return;
    nodes_->stop();
    pods_->stop();
    server_.close_watches();
    for (std::thread& t : threads_) t.join();
    threads_.clear();
  }

  template <typename F>
  auto with_model(F f) {
    std::lock_guard lock(mu_);
    return f(cluster_);
  }
  bool holds(const std::string& uid) {
    return with_model([&](Cluster& c) { return c.allocation(uid) != nullptr; });
  }
  std::size_t allocation_count() {
    return with_model([](Cluster& c) { return c.allocation_count(); });
  }
  ClusterSync& sync() { return sync_; }
  ApiClient& client() { return client_; }
  std::vector<std::string> errors() {
    std::lock_guard lock(mu_);
    return errors_;
  }

 private:
  ClusterSyncHooks hooks() {
    ClusterSyncHooks h;
    h.mutate = [this](const std::function<void(Cluster&)>& f) {
      std::lock_guard lock(mu_);
      f(cluster_);
    };
    h.log = [this](const std::string& m) {
      std::lock_guard lock(mu_);
      errors_.push_back(m);
    };
    return h;
  }

  FakeApiServer& server_;
  ApiClient client_;
  std::mutex mu_;
  Cluster cluster_;
  std::vector<std::string> errors_;
  ClusterSync sync_{hooks()};
  std::unique_ptr<Informer> nodes_;
  std::unique_ptr<Informer> pods_;
  std::vector<std::thread> threads_;
};

// Lists (not watches) of `path` the server answered.
std::size_t lists_of(const FakeApiServer& server, const std::string& path) {
  std::size_t n = 0;
  for (const auto& r : server.requests()) {
    if (r.method == "GET" && r.path == path && r.target.find("watch=1") == std::string::npos) ++n;
  }
  return n;
}

}  // namespace

TEST_CASE("integration: initial sync, then watch events", "[k8s][integration]") {
  FakeApiServer server;
  server.load({topology_node("n1", 8), topology_node("n2", 4)},
              {bound_pod(whole("u1", "n1", {0, 1})), bound_pod(whole("u2", "n2", {3})),
               pod_object("pending", "u3", ""), pod_object("foreign", "u4", "n2")});
  Live live(server);
  live.start(/*page_size=*/1);
  REQUIRE(eventually([&] { return live.sync().synced(); }));
  CHECK(live.allocation_count() == 2);
  CHECK(live.holds("u1"));
  CHECK(live.holds("u2"));
  CHECK(lists_of(server, "/api/v1/pods") == 4);  // chunked: one pod per page

  server.add_pod(bound_pod(whole("u5", "n1", {7})));
  REQUIRE(eventually([&] { return live.holds("u5"); }));
  server.update_pod("ml", "pod-u1", [](json& p) { p["status"]["phase"] = "Succeeded"; });
  REQUIRE(eventually([&] { return !live.holds("u1"); }));
  server.delete_pod("ml", "pod-u2");
  REQUIRE(eventually([&] { return !live.holds("u2"); }));
  server.replace_node(topology_node("n2", 8));
  REQUIRE(eventually([&] {
    return live.with_model([](Cluster& c) { return c.find_node("n2")->gpus.size() == 8; });
  }));
  server.delete_node("n2");
  REQUIRE(eventually(
      [&] { return live.with_model([](Cluster& c) { return c.find_node("n2") == nullptr; }); }));
  CHECK(live.holds("u5"));
}

TEST_CASE("integration: a dropped watch resumes without a relist", "[k8s][integration]") {
  FakeApiServer server;
  server.load({topology_node("n1", 8)}, {bound_pod(whole("u1", "n1", {0}))});
  Live live(server);
  live.start();
  REQUIRE(eventually([&] { return live.sync().synced(); }));
  REQUIRE(server.wait_for_watches(2));

  const bool abrupt = GENERATE(false, true);
  INFO("abrupt: " << abrupt);
  server.close_watches(abrupt);
  server.add_pod(bound_pod(whole("u2", "n1", {1})));  // may happen while no watch is open
  REQUIRE(eventually([&] { return live.holds("u2"); }));
  REQUIRE(server.wait_for_watches(2));
  server.delete_pod("ml", "pod-u1");
  REQUIRE(eventually([&] { return !live.holds("u1"); }));
  CHECK(lists_of(server, "/api/v1/pods") == 1);
  CHECK(lists_of(server, "/api/v1/nodes") == 1);
}

TEST_CASE("integration: 410 relists without missing a deletion", "[k8s][integration]") {
  FakeApiServer server;
  const bool http_status = GENERATE(false, true);
  INFO("410 as HTTP status: " << http_status);
  server.set_expiry_form(http_status ? FakeApiServer::ExpiryForm::kHttpStatus
                                     : FakeApiServer::ExpiryForm::kErrorEvent);
  server.load({topology_node("n1", 8)},
              {bound_pod(whole("u1", "n1", {0})), bound_pod(whole("u2", "n1", {1}))});
  Live live(server);
  live.start();
  REQUIRE(eventually([&] { return live.sync().synced(); }));
  REQUIRE(server.wait_for_watches(2));

  // Keep the pod informer away (its re-watches fail) while a pod is deleted and the history
  // that recorded the deletion is compacted away.
  server.fail_next("GET", "/api/v1/pods", 3, 503, "unavailable");
  server.close_watches();
  server.delete_pod("ml", "pod-u1");
  server.compact();
  REQUIRE(eventually([&] { return !live.holds("u1"); }));
  CHECK(live.holds("u2"));
  CHECK(lists_of(server, "/api/v1/pods") == 2);
  // And the watch resumes from the relist.
  server.add_pod(bound_pod(whole("u3", "n1", {2})));
  REQUIRE(eventually([&] { return live.holds("u3"); }));
}

TEST_CASE("integration: KubeBinder against the API server", "[k8s][integration][binder]") {
  FakeApiServer server;
  server.load({topology_node("n1", 8), topology_node("n2", 8)}, {pod_object("p", "u1", "")});
  ApiClient client(server.client_config());
  KubeBinder binder(client);
  const Allocation a = whole("u1", "n1", {2, 3});
  BindRequest req{"ml", "p", "u1", "n1", {{"gapless.io/allocation", encode_allocation_record(a)}}};

  SECTION("500") {
    server.fail_next("POST", "/api/v1/namespaces/ml/pods/p/binding", 1, 500, "etcd timeout");
    Status s = binder.bind(req);
    REQUIRE_FALSE(s.ok());
    CHECK(s.error().find("etcd timeout") != std::string::npos);
    CHECK(server.pod("ml", "p")->value("spec", json::object()).count("nodeName") == 0);
    REQUIRE(server.events().size() == 1);
    CHECK(server.events()[0]["reason"] == "FailedBinding");
  }
  SECTION("success, a retry, and a conflicting bind") {
    REQUIRE(binder.bind(req).ok());
    const json pod = *server.pod("ml", "p");
    CHECK(pod["spec"]["nodeName"] == "n1");
    CHECK(pod["metadata"]["annotations"]["gapless.io/allocation"] ==
          req.annotations["gapless.io/allocation"]);
    CHECK(server.bindings().size() == 1);

    CHECK(binder.bind(req).ok());  // the reply was lost: 409, but bound as asked
    CHECK(server.events().empty());

    BindRequest elsewhere = req;
    elsewhere.node = "n2";
    Status s = binder.bind(elsewhere);
    REQUIRE_FALSE(s.ok());
    CHECK(s.error().find("409") != std::string::npos);
    REQUIRE(server.events().size() == 1);
    const json e = server.events()[0];
    CHECK(e["reason"] == "FailedBinding");
    CHECK(e["involvedObject"]["uid"] == "u1");
    CHECK(server.pod("ml", "p")->at("spec").at("nodeName") == "n1");
  }
}

TEST_CASE("integration: rebuild 5,000 nodes and 50,000 bound pods", "[k8s][integration][rebuild]") {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  constexpr int kNodes = 500;  // the same path, at a size sanitizers get through quickly
#else
  constexpr int kNodes = 5000;
#endif
  std::vector<json> nodes;
  std::vector<json> pods;
  nodes.reserve(kNodes);
  pods.reserve(kNodes * 10);
  for (int n = 0; n < kNodes; ++n) {
    const std::string node = "gpu-" + std::to_string(n);
    nodes.push_back(topology_node(node, 8));
    // Ten pods a node: six whole GPUs, four shares on GPUs 6 and 7.
    for (int g = 0; g < 6; ++g)
      pods.push_back(bound_pod(whole(node + "-w" + std::to_string(g), node, {g})));
    for (int s = 0; s < 4; ++s) {
      Allocation a = whole(node + "-s" + std::to_string(s), node, {});
      const int gpu = 6 + s / 2;
      a.gpus = {{gpu, node + "-GPU-" + std::to_string(gpu), 20480, 250}};
      pods.push_back(bound_pod(a));
    }
  }
  FakeApiServer server;
  server.load(nodes, pods);
  Live live(server);
  const auto start = std::chrono::steady_clock::now();
  live.start();
  REQUIRE(eventually([&] { return live.sync().synced(); }, 300s));
  const auto elapsed = std::chrono::steady_clock::now() - start;
  std::cout << "rebuild of " << kNodes << " nodes and " << pods.size()
            << " bound pods from the API server: "
            << std::chrono::duration_cast<std::chrono::milliseconds>(elapsed).count() << " ms"
            << std::endl;
  CHECK(live.allocation_count() == pods.size());
  CHECK(live.sync().bad_records() == 0);
  live.with_model([&](Cluster& c) {
    CHECK(c.node_count() == static_cast<std::size_t>(kNodes));
    const auto* n = c.find_node("gpu-" + std::to_string(kNodes - 1));
    REQUIRE(n != nullptr);
    CHECK(n->gpus[5].used.whole);
    CHECK(n->gpus[7].used.shared_pods == 2);
    return 0;
  });
}

#endif  // __has_include("fake_api_server.h")
