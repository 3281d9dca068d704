// The extender wired to Kubernetes as gapless-extender runs it: informers feed the model, binds go
// through KubeBinder to the fake API server. Checks the two promises platform teams rely on:
// concurrent binds never double-book a GPU, and a restart rebuilds exactly the same model.
#if __has_include("fake_api_server.h")
#include <catch2/catch.hpp>

#include <atomic>
#include <set>
#include <thread>

#include "../k8s/k8s_objects.h"
#include "fake_api_server.h"
#include "gapless/k8s/cluster_sync.h"
#include "gapless/k8s/informer.h"
#include "gapless/k8s/kube_binder.h"
#include "gapless/server/extender.h"

using namespace gapless;
using namespace std::chrono_literals;
using nlohmann::json;

namespace {

// One running extender: model fed by node and pod informers, binds through the API server.
class KubeExtender {
 public:
  explicit KubeExtender(test::FakeApiServer& server)
      : server_(server),
        client_(server.client_config()),
        binder_(client_),
        extender_(model::Cluster{}, placement::builtin_policy(), binder_, metrics_),
        sync_(hooks()) {
    extender_.set_readiness([this] { return sync_.synced(); });
    k8s::InformerOptions o;
    o.watch_timeout_seconds = 30;
    o.backoff_initial = 20ms;
    o.path = "/api/v1/nodes";
    nodes_ = std::make_unique<k8s::Informer>(client_, o, sync_.node_handlers());
    o.path = "/api/v1/pods";
    o.field_selector = "status.phase!=Succeeded,status.phase!=Failed";
    pods_ = std::make_unique<k8s::Informer>(client_, o, sync_.pod_handlers());
    threads_.emplace_back([this] {
      nodes_->run();
      ++done_;
    });
    threads_.emplace_back([this] {
      pods_->run();
      ++done_;
    });
  }
  ~KubeExtender() {
    nodes_->stop();
    pods_->stop();
    // An informer between two watches when they are closed opens a new one: close until both
    // informers have returned, or teardown waits for the watch timeout.
    while (done_ < 2) {
      server_.close_watches();
      std::this_thread::sleep_for(10ms);
    }
    for (auto& t : threads_) t.join();
  }

  server::Extender& extender() { return extender_; }
  bool wait(const std::function<bool()>& cond, std::chrono::seconds limit = 20s) {
    const auto end = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < end) {
      if (cond()) return true;
      std::this_thread::sleep_for(10ms);
    }
    return cond();
  }
  std::size_t allocations() {
    std::size_t n = 0;
    extender_.mutate([&](model::Cluster& c) { n = c.allocation_count(); });
    return n;
  }

 private:
  k8s::ClusterSyncHooks hooks() { return extender_.sync_hooks(); }

  test::FakeApiServer& server_;
  k8s::ApiClient client_;
  k8s::KubeBinder binder_;
  server::Metrics metrics_;
  server::Extender extender_;
  k8s::ClusterSync sync_;
  std::unique_ptr<k8s::Informer> nodes_;
  std::unique_ptr<k8s::Informer> pods_;
  std::vector<std::thread> threads_;
  std::atomic<int> done_{0};
};

std::string args_for(const json& pod, const std::string& node) {
  return json{{"Pod", pod}, {"Nodes", nullptr}, {"NodeNames", {node}}}.dump();
}

}  // namespace

TEST_CASE("64 concurrent binds race for 8 GPUs through the API server: no double booking",
          "[server][k8s]") {
  test::FakeApiServer server;
  std::vector<json> pods;
  for (int i = 0; i < 64; ++i) {
    pods.push_back(
        k8s::testing::pod_object("p" + std::to_string(i), "uid-" + std::to_string(i), ""));
  }
  server.load({k8s::testing::topology_node("n1", 8)}, pods);

  KubeExtender live(server);
  REQUIRE(live.wait([&] { return live.extender().ready(); }));

  std::atomic<int> bound{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 64; ++i) {
    threads.emplace_back([&, i] {
      const json f = json::parse(live.extender().filter(args_for(pods[i], "n1")));
      if (f.at("Error") != "") return;
      const json b = json::parse(live.extender().bind(json{
          {"PodName", "p" + std::to_string(i)},
          {"PodNamespace", "ml"},
          {"PodUID", "uid-" + std::to_string(i)},
          {"Node", "n1"}}.dump()));
      if (b.at("Error") == "") ++bound;
    });
  }
  for (auto& t : threads) t.join();

  CHECK(bound == 8);
  const auto bindings = server.bindings();
  REQUIRE(bindings.size() == 8);
  std::set<int> gpus;
  for (const json& b : bindings) {
    const auto record = json::parse(
        b.at("metadata").at("annotations").at("gapless.io/allocation").get<std::string>());
    for (const json& g : record.at("gpus")) gpus.insert(g.at("index").get<int>());
  }
  CHECK(gpus.size() == 8);  // eight binds, eight different GPUs
  CHECK(live.allocations() == 8);

  SECTION("a restart rebuilds exactly the same model from the pods' records") {
    // Let the first extender see its own binds come back as pod updates first.
    REQUIRE(live.wait([&] {
      int seen = 0;
      for (int i = 0; i < 64; ++i) {
        auto p = server.pod("ml", "p" + std::to_string(i));
        if (p && p->at("spec").contains("nodeName")) ++seen;
      }
      return seen == 8;
    }));
    const std::string before = live.extender().debug_state();
    KubeExtender restarted(server);
    REQUIRE(restarted.wait([&] { return restarted.extender().ready(); }));
    CHECK(restarted.extender().debug_state() == before);
    CHECK(restarted.allocations() == 8);
  }
}
#endif
