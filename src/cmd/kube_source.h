// Kubernetes mode of gapless-extender: the API client, the binder that writes Bindings, and the
// node and pod informers feeding the model, the namespace informer feeding quotas' namespace
// selectors, the PodDisruptionBudget informer feeding preemption, the claims that keep replicas
// from binding the same GPUs. Nodes are listed before pods, so every allocation record finds its
// node when it is restored.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "gapless/k8s/api_client.h"
#include "gapless/k8s/cluster_sync.h"
#include "gapless/k8s/disruption_budgets.h"
#include "gapless/k8s/informer.h"
#include "gapless/k8s/kube_binder.h"
#include "gapless/k8s/node_claims.h"
#include "gapless/k8s/node_facts.h"
#include "gapless/k8s/pod_requeue.h"
#include "gapless/k8s/scheduler_lease.h"
#include "gapless/k8s/unbound_pods.h"
#include "gapless/server/consolidator.h"
#include "gapless/server/extender.h"
#include "gapless/server/metrics.h"

class KubeSource {
 public:
  // `claims`: where this replica claims GPUs before binding (docs/high-availability.md).
  // `scheduler_name`: kube-scheduler's profile for Gapless; its pods that kube-scheduler finds
  // no node for wait (docs/policies.md "Waiting pods"). `requeue`: which of its pods this
  // replica annotates once ready, after kube-scheduler parked them on an extender error
  // (docs/high-availability.md); a zero window turns that off. `events`: which Events binds post
  // beside the failure Events (--bound-events). `consolidation`: the driver's limits; it evicts
  // only while the policy enables consolidation and the lease in `requeue` names this replica's
  // kube-scheduler (docs/consolidation.md).
  KubeSource(gapless::k8s::ClientConfig config, gapless::k8s::ClaimOptions claims,
             std::string scheduler_name, gapless::k8s::RequeueOptions requeue,
             gapless::k8s::BindEvents events,
             gapless::server::ConsolidatorOptions consolidation = {});
  ~KubeSource();  // stops and joins the informers

  gapless::k8s::Binder& binder() { return binder_; }
  // The nodes as the node informer last saw them (labels: the admission webhook's pins).
  const gapless::k8s::NodeFactsStore& node_facts() const { return node_facts_; }
  // Starts the informers feeding `extender`, makes it ready once every list is applied (a
  // quota selecting namespaces must not be judged before their labels are known), and makes its
  // binds claim their GPUs first.
  void start(gapless::server::Extender& extender, gapless::server::Metrics& metrics);
  bool synced() const {
    return sync_ && sync_->synced() && namespaces_ && namespaces_->synced() && budgets_.synced();
  }
  void stop();

 private:
  gapless::k8s::ApiClient api_;
  gapless::k8s::NodeFactsStore node_facts_;     // before binder_, which reads it
  gapless::k8s::UnboundPodStore unbound_pods_;  // the same
  gapless::k8s::KubeBinder binder_;
  gapless::k8s::KubeNodeClaims claims_;
  std::string scheduler_name_;
  std::unique_ptr<gapless::k8s::ClusterSync> sync_;
  std::unique_ptr<gapless::k8s::Informer> nodes_;
  std::unique_ptr<gapless::k8s::Informer> pods_;
  std::unique_ptr<gapless::k8s::Informer> namespaces_;
  gapless::k8s::DisruptionBudgets budgets_;
  std::unique_ptr<gapless::k8s::Informer> pdbs_;
  std::thread nodes_thread_;
  std::thread pods_thread_;
  std::thread namespaces_thread_;
  std::thread pdbs_thread_;
  gapless::k8s::PodRequeue requeue_;
  std::thread requeue_thread_;
  gapless::server::ConsolidatorOptions consolidation_options_;
  gapless::k8s::SchedulerLease consolidation_lease_;  // an unreadable lease: not the leader
  std::unique_ptr<gapless::server::Consolidator> consolidator_;
  std::thread consolidation_thread_;
  std::atomic<bool> stopping_{false};
};
