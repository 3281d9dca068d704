// One running gapless-extender wired to a (fake) Kubernetes API server as gapless-extender runs
// it: node and pod informers feed the model through ClusterSync, binds go through KubeBinder
// (which checks each against the API server's pod, as the pod informer holds it or read, and the
// node informer's labels and taints).
// Header-only, for the test binaries that link gapless_server (server, agent end to end).
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "fake_api_server.h"
#include "gapless/k8s/cluster_sync.h"
#include "gapless/k8s/informer.h"
#include "gapless/k8s/kube_binder.h"
#include "gapless/k8s/node_claims.h"
#include "gapless/k8s/node_facts.h"
#include "gapless/k8s/unbound_pods.h"
#include "gapless/server/claim_settlement.h"
#include "gapless/server/extender.h"

namespace gapless::test {

using namespace std::chrono_literals;

// One running extender: model fed by node and pod informers, binds through the API server.
// With a `replica` name, binds claim their GPUs first (one of several replicas, README "High
// availability"); without, no claims (a single replica).
class KubeExtender {
 public:
  // `pairing`: the bind gate on (docs/node-pairing.md), fed by the pod informer as in
  // gapless-extender.
  // `claim_objects`: k8s::ClaimOptions::objects (the default: as gapless-extender ships).
  explicit KubeExtender(test::FakeApiServer& server, std::string replica = "",
                        std::optional<server::PairingOptions> pairing = std::nullopt,
                        std::size_t claim_objects = k8s::ClaimOptions{}.objects)
      : server_(server),
        client_(server.client_config()),
        binder_(client_),
        claims_(client_, claim_options(replica, claim_objects)),
        extender_(model::Cluster{}, placement::builtin_policy(), binder_, metrics_),
        sync_(hooks()) {
    extender_.set_readiness([this] { return sync_.synced(); });
    extender_.enable_bind_threads(4, 64);  // as gapless-extender runs binds
    if (pairing) extender_.enable_pairing(*pairing);
    k8s::InformerOptions o;
    o.watch_timeout_seconds = 30;
    o.backoff_initial = 20ms;
    o.path = "/api/v1/nodes";
    binder_.set_node_facts(&node_facts_);  // as gapless-extender checks binds
    nodes_ = std::make_unique<k8s::Informer>(client_, o, node_facts_.feed(sync_.node_handlers()));
    o.path = "/api/v1/pods";
    o.field_selector = "status.phase!=Succeeded,status.phase!=Failed";
    binder_.set_unbound_pods(&unbound_pods_);  // as gapless-extender checks binds
    k8s::InformerHandlers pod_handlers = unbound_pods_.feed(sync_.pod_handlers());
    pod_handlers.on_list =
        [this, model = pod_handlers.on_list](const std::vector<nlohmann::json>& items) {
          model(items);
          extender_.pairing_pod_list(items);
        };
    pod_handlers.on_event = [this, model = pod_handlers.on_event](const std::string& type,
                                                                  const nlohmann::json& pod) {
      model(type, pod);
      extender_.pairing_pod_event(type, pod);
    };
    pods_ = std::make_unique<k8s::Informer>(client_, o, pod_handlers);
    // As gapless-extender settles claims (src/cmd/kube_source.cpp).
    claims_.set_settlement(server::claim_settlement(extender_.scheduler(), sync_, *pods_));
    if (!replica.empty()) extender_.set_claims(&claims_);
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
  server::Metrics& metrics() { return metrics_; }
  const k8s::ClusterSync& sync() const { return sync_; }
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
  static k8s::ClaimOptions claim_options(const std::string& replica, std::size_t objects) {
    k8s::ClaimOptions o;
    o.holder = replica;
    o.objects = objects;
    return o;
  }

  test::FakeApiServer& server_;
  k8s::ApiClient client_;
  k8s::NodeFactsStore node_facts_;
  k8s::UnboundPodStore unbound_pods_;
  k8s::KubeBinder binder_;
  k8s::KubeNodeClaims claims_;
  server::Metrics metrics_;
  server::Extender extender_;
  k8s::ClusterSync sync_;
  std::unique_ptr<k8s::Informer> nodes_;
  std::unique_ptr<k8s::Informer> pods_;
  std::vector<std::thread> threads_;
  std::atomic<int> done_{0};
};

}  // namespace gapless::test
