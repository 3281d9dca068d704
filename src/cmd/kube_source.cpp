#include "kube_source.h"

#include <chrono>

#include "gapless/k8s/namespace_sync.h"
#include "gapless/server/claim_settlement.h"
#include "gapless/server/log.h"

using namespace gapless;

namespace {

// Namespaces' labels go to the Scheduler as plain data.
k8s::NamespaceHooks namespace_hooks(placement::Scheduler& s) {
  k8s::NamespaceHooks h;
  h.replace = [&s](std::unordered_map<std::string, model::Labels> all) {
    s.set_namespaces(std::move(all));
  };
  h.set = [&s](const std::string& ns, model::Labels labels) {
    s.set_namespace(ns, std::move(labels));
  };
  h.erase = [&s](const std::string& ns) { s.erase_namespace(ns); };
  return h;
}

void log_line(const std::string& m) {
  server::log_info(m);
}

}  // namespace

KubeSource::KubeSource(k8s::ClientConfig config, k8s::ClaimOptions claims,
                       std::string scheduler_name, k8s::RequeueOptions requeue,
                       k8s::BindEvents events, server::ConsolidatorOptions consolidation)
    : api_(std::move(config)),
      binder_(api_, "gapless-extender", events),
      claims_(api_, std::move(claims)),
      scheduler_name_(std::move(scheduler_name)),
      requeue_(api_, requeue, log_line),
      consolidation_options_(std::move(consolidation)),
      // Evictions only for the leader's kube-scheduler: an unreadable lease is someone else's.
      consolidation_lease_(api_, k8s::lease_options(requeue, false), "consolidation", log_line) {}

KubeSource::~KubeSource() {
  stop();
}

void KubeSource::start(server::Extender& extender, server::Metrics& metrics) {
  k8s::ClusterSyncHooks hooks = extender.sync_hooks();
  hooks.on_bad_record = [this, &metrics](const std::string& pod, const std::string& node,
                                         const std::string& why) {
    metrics.count_bad_record();
    const std::size_t slash = pod.find('/');  // "ns/name"
    if (slash != std::string::npos) {
      binder_.warn_fenced(pod.substr(0, slash), pod.substr(slash + 1), node, why);
    }
    server::log_error("allocation record of pod " + pod + " cannot be used (" + why + "); node " +
                      node + " is fenced until it is fixed");
  };
  // ClusterSync logs the lift itself (hooks.log); only count it here.
  hooks.on_fence_lifted = [&metrics](const std::string&, const std::string&) {
    metrics.count_fence_lifted();
  };
  hooks.on_reservation_dropped = [&metrics](const std::string& pod, const std::string& node,
                                            const std::string& why) {
    metrics.count_reservation_dropped();
    server::log_warn("reservation of pod " + pod + " on node " + node + " dropped: " + why);
  };
  hooks.log = [](const std::string& m) { server::log_info(m); };
  // Pods' labels also feed the PodDisruptionBudgets preemption respects.
  hooks.observe = [this, learn = hooks.observe](const model::PodInfo& pod,
                                                const model::GpuRequest& req) {
    if (learn) learn(pod, req);
    budgets_.observe_pod(pod);
  };
  hooks.forget = [this, drop = hooks.forget](const std::string& uid) {
    if (drop) drop(uid);
    budgets_.forget_pod(uid);
  };
  extender.set_disruption_budgets([this] { return budgets_.resolve(); });
  // Waiting pods also go to the consolidation driver (docs/consolidation.md).
  consolidator_ = std::make_unique<server::Consolidator>(
      extender.scheduler(), api_,
      [this](server::Consolidator::Clock::time_point now) {
        return consolidation_lease_.leads(now);
      },
      [this] { return budgets_.resolve(); }, consolidation_options_, log_line);
  hooks.unschedulable = [this, wait = hooks.unschedulable](const k8s::ParsedPod& pod) {
    if (wait) wait(pod);
    consolidator_->waiting(pod);
  };
  hooks.stop_waiting = [this, stop = hooks.stop_waiting](const std::string& uid) {
    if (stop) stop(uid);
    consolidator_->stopped(uid);
  };
  sync_ = std::make_unique<k8s::ClusterSync>(std::move(hooks), scheduler_name_);
  extender.set_readiness([this] { return synced(); });

  auto on_error = [](const std::string& what) { server::log_warn(what); };
  // The bind check (KubeBinder::admit) reads nodes' labels and taints from the same informer.
  k8s::InformerHandlers node_handlers = node_facts_.feed(sync_->node_handlers());
  binder_.set_node_facts(&node_facts_);
  node_handlers.on_error = on_error;
  // The pods kube-scheduler parked on an error of this extender are annotated once it is ready.
  // The bind check takes the pods the informer holds unbound from it, without a read.
  k8s::InformerHandlers pod_handlers = unbound_pods_.feed(requeue_.feed(sync_->pod_handlers()));
  binder_.set_unbound_pods(&unbound_pods_);
  pod_handlers.on_error = on_error;
  // The pairing gate follows the same pods (docs/node-pairing.md), after the model has them.
  pod_handlers.on_list = [&extender,
                          model = pod_handlers.on_list](const std::vector<nlohmann::json>& items) {
    model(items);
    extender.pairing_pod_list(items);
  };
  pod_handlers.on_event = [&extender, model = pod_handlers.on_event](const std::string& type,
                                                                     const nlohmann::json& pod) {
    model(type, pod);
    extender.pairing_pod_event(type, pod);
  };
  k8s::InformerOptions node_opts;
  node_opts.path = "/api/v1/nodes";
  k8s::InformerOptions pod_opts;
  pod_opts.path = "/api/v1/pods";
  pod_opts.field_selector = "status.phase!=Succeeded,status.phase!=Failed";
  nodes_ = std::make_unique<k8s::Informer>(api_, node_opts, node_handlers);
  pods_ = std::make_unique<k8s::Informer>(api_, pod_opts, pod_handlers);
  // Claims are settled through this replica's own pod informer (docs/high-availability.md).
  claims_.set_settlement(server::claim_settlement(extender.scheduler(), *sync_, *pods_));
  extender.set_claims(&claims_);
  k8s::InformerHandlers ns_handlers =
      k8s::namespace_handlers(namespace_hooks(extender.scheduler()));
  ns_handlers.on_error = on_error;
  k8s::InformerOptions ns_opts;
  ns_opts.path = "/api/v1/namespaces";
  namespaces_ = std::make_unique<k8s::Informer>(api_, ns_opts, ns_handlers);
  k8s::InformerHandlers pdb_handlers = budgets_.handlers();
  pdb_handlers.on_error = on_error;
  k8s::InformerOptions pdb_opts;
  pdb_opts.path = "/apis/policy/v1/poddisruptionbudgets";
  pdbs_ = std::make_unique<k8s::Informer>(api_, pdb_opts, pdb_handlers);

  nodes_thread_ = std::thread([this] { nodes_->run(); });
  pods_thread_ = std::thread([this] {
    // Pods after nodes: a record restored before its node exists would look corrupt.
    while (!stopping_ && !nodes_->synced())
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (!stopping_) pods_->run();
  });
  namespaces_thread_ = std::thread([this] { namespaces_->run(); });
  pdbs_thread_ = std::thread([this] { pdbs_->run(); });
  requeue_thread_ = std::thread([this] {
    while (!stopping_) {
      requeue_.step(synced(), k8s::PodRequeue::Clock::now());
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  consolidation_thread_ = std::thread([this] {
    while (!stopping_) {
      consolidator_->step(synced(), server::Consolidator::Clock::now());
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
  });
}

void KubeSource::stop() {
  if (stopping_.exchange(true)) return;
  if (nodes_) nodes_->stop();
  if (pods_) pods_->stop();
  if (namespaces_) namespaces_->stop();
  if (pdbs_) pdbs_->stop();
  if (nodes_thread_.joinable()) nodes_thread_.join();
  if (pods_thread_.joinable()) pods_thread_.join();
  if (namespaces_thread_.joinable()) namespaces_thread_.join();
  if (pdbs_thread_.joinable()) pdbs_thread_.join();
  if (requeue_thread_.joinable()) requeue_thread_.join();
  if (consolidation_thread_.joinable()) consolidation_thread_.join();
}
