// The extension points of the scheduling runner (placement::Scheduler), after kube-scheduler's
// scheduling framework: the runner owns the model, the policy and the lock, and at each named
// point calls the stages registered in stage_registry.cpp, in their order. A stage implements
// only the points it cares about; every point has a default that does nothing.
//
//   point          lock    what a stage may do there
//   PreFilter      read    refuse the pod on every node, with one unresolvable reason
//   Filter         read    refuse some of the nodes the engine's fit check passed
//   Narrow         read    drop passed nodes by their scores (filter with a profile)
//   PostScore      read    withhold nodes from one pod's scores (-1)
//   PreReserve     write   narrow the request the pick uses on the node, or refuse the node
//   Reserve        write   refuse what the pick chose, before it is committed
//   PostFilter     read    choose victims per node (preemption); the first stage that answers
//   Consolidate    read    plan moves that make one node fit a waiting pod; the first that answers
//   Start          write   build state from the model the runner starts with
//   ModelChanged   write   follow the model's changes (reserve, release, informers)
//   PodForgotten   write   a pod was deleted
//
// Thread-safety: the runner calls the read points concurrently (so they are const) and the
// write points alone. A stage must not call back into the runner: it runs under its lock.
// Ownership: the registry's Stages own the stages; a StageCall lends everything for one call.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gapless/model/allocation.h"
#include "gapless/model/cluster.h"
#include "gapless/model/request.h"
#include "gapless/placement/consolidation.h"
#include "gapless/placement/engine.h"
#include "gapless/placement/preemption.h"
#include "gapless/placement/profile.h"
#include "gapless/placement/quota.h"

namespace gapless::placement {

// What the runner lends a stage for one pod. Valid for the call only.
struct StageCall {
  const model::Cluster& cluster;
  const std::vector<Quota>& quotas;  // of the policy this call runs under
  std::int64_t cluster_gpus = 0;     // every GPU in the model, whatever its health
  const model::PodInfo& pod;
  const model::GpuRequest& req;
  bool check_host = true;  // SchedulerOptions::check_host
};

// PostFilter's question for one node: kube-scheduler's proposed victims there.
struct VictimQuery {
  std::string node;
  std::vector<ProposedVictim> proposed;
};

class Stage {
 public:
  Stage() = default;
  Stage(const Stage&) = delete;
  Stage& operator=(const Stage&) = delete;
  virtual ~Stage() = default;

  // For logs and docs; unique among the registered stages.
  virtual std::string_view name() const = 0;

  // PreFilter: a reason that refuses the pod on every node (unresolvable: evicting other pods
  // cannot help), or nullopt. The first stage that refuses decides; later points do not run.
  virtual std::optional<FilterResult::Reason> pre_filter(const StageCall&) const {
    return std::nullopt;
  }
  // Filter: moves the passed nodes it refuses to r->rejected. REQUIRES: `passed_nodes` aligned
  // with r->passed (null where a name is no node); the stage keeps them aligned.
  virtual void filter(const StageCall&, FilterResult*,
                      std::vector<const model::Node*>* /*passed_nodes*/) const {}

  // Narrow: whether the stage narrows `passed` nodes under `profile`; only then does the runner
  // score them and call narrow() with their raw scores. REQUIRES: `raw` and `passed_nodes`
  // (may be null) aligned with r->passed; the stage keeps `passed_nodes` aligned.
  virtual bool narrows(const Profile&, std::size_t /*passed*/) const { return false; }
  virtual void narrow(const Profile&, FilterResult*,
                      std::vector<const model::Node*>* /*passed_nodes*/,
                      const std::vector<double>& /*raw*/) const {}

  // PostScore: may set scores to -1 (nodes this pod must not get). `raw` aligned with `nodes`.
  virtual void post_score(const StageCall&, const std::vector<std::string>& /*nodes*/,
                          std::vector<double>* /*raw*/) const {}

  // PreReserve: may narrow `fit` (what the pick on `node` may use); a non-empty reason refuses.
  virtual std::string pre_reserve(const StageCall&, const std::string& /*node*/,
                                  model::GpuRequest* /*fit*/) const {
    return "";
  }
  // Reserve: a non-empty reason refuses `picked` before it is committed (model unchanged).
  virtual std::string reserve(const StageCall&, const std::string& /*node*/,
                              const model::Allocation& /*picked*/) const {
    return "";
  }

  // PostFilter: per query, the victims whose eviction lets the pod fit (nullopt: none helps).
  // Returns false when the stage does not choose victims.
  virtual bool post_filter(const StageCall&, const std::vector<VictimQuery>&,
                           const std::vector<DisruptionBudget>&,
                           std::vector<std::optional<VictimChoice>>* /*out*/) const {
    return false;
  }

  // Consolidate: for a pod no node fits, the moves of movable pods that make one node fit it,
  // under `query` (the policy's rules, the driver's clock). Returns false when the stage does
  // not plan moves.
  virtual bool consolidate(const StageCall&, const Profile&, const ConsolidationQuery&,
                           ConsolidationSearch* /*out*/) const {
    return false;
  }

  // Start: the runner's model, once, before any other point.
  virtual void start(const model::Cluster&) {}
  // ModelChanged: `changes` as the model took them; `touched` the changed nodes still present.
  virtual void model_changed(const model::Cluster&, const model::Cluster::Changes& /*changes*/,
                             const std::vector<const model::Node*>& /*touched*/) {}
  // PodForgotten: the pod was deleted.
  virtual void pod_forgotten(const model::Cluster&, const std::string& /*pod_uid*/) {}
};

}  // namespace gapless::placement
