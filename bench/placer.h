// The engine path every replay takes for one pod, through placement::Scheduler (the object the
// extender runs): Filter and Score over every node (Scheduler::score, -1 where the pod does not
// fit), the best score wins with ties to the seeded node order (the FGD simulator's selectHost),
// then Reserve on that node. The static replay (replay.cpp) and the dynamic one in-process
// (replay_dynamic.cpp) both place through it.
//
// Thread-safety: one Placer per replay, used by one thread; it keeps references to the nodes'
// priorities and the Workload it was built with.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "gapless/model/cluster.h"
#include "gapless/placement/fragmentation.h"
#include "gapless/placement/scheduler.h"
#include "replay.h"
#include "rng.h"

namespace gapless::bench {

class Placer {
 public:
  // `track_oracle`: keep oracle_total() current (the static replay's frag metrics).
  Placer(const std::vector<model::Node>& nodes, const Workload& w, const PolicySetup& policy,
         const std::vector<int>& node_priority, std::uint64_t seed, bool track_oracle);

  std::size_t node_count() const { return ptrs_.size(); }
  // Single-threaded replay: nodes are read between Scheduler calls, never during one.
  const model::Node& node(std::size_t n) const { return *ptrs_[n]; }
  double oracle_total() const { return oracle_.total(); }

  // Lets the learned mix see an arriving pod (once per pod).
  void observe(int pod, const std::string& uid) {
    sched_.observe(info(pod, uid), w_.requests[pod]);
  }

  // Places the pod under `uid`. Returns its node's index and sets *granted to the GPU milli it
  // got, or returns node_count() when it fits nowhere.
  std::size_t place(int pod, const std::string& uid, std::int64_t* granted);

  // The pod fits no node and waits (its profile may reserve a node to drain for it), or no
  // longer does (it gave up). Cheap for pods too small to reserve.
  void wait(int pod, const std::string& uid, double t) {
    sched_.wait(info(pod, uid), w_.requests[pod], profile_, t);
  }
  void stop_waiting(const std::string& uid) { sched_.stop_waiting(uid); }
  // The model as it stands (between calls; the replay is single-threaded).
  void read(const std::function<void(const model::Cluster&)>& f) const { sched_.read(f); }

  // Consolidation: whether the pod placed under a uid is movable (opted in); unset: none is.
  void set_movable(std::function<bool(const std::string& uid)> movable) {
    movable_ = std::move(movable);
  }
  // The pod fits no node at t: the Scheduler's consolidation plan, applied as a driver would:
  // the plan's pods released, the pod reserved on the plan's node, each moved pod reserved
  // where the plan placed it (else wherever place() puts it), the moves reported made.
  // `started_at(uid)`: when a running pod last started; `pod_of(uid)`: the workload pod of a
  // uid. Nullopt when there is no plan (or consolidation is off or in dry-run).
  std::optional<DynamicPath::Room> make_room(
      int pod, const std::string& uid, double t,
      const std::function<double(const std::string&)>& started_at,
      const std::function<int(const std::string&)>& pod_of);

  // Frees the allocation of `uid`, which place() put on node n.
  void release(const std::string& uid, std::size_t n) {
    if (sched_.release(uid)) changed(n);
  }

 private:
  static model::Cluster cluster_of(const std::vector<model::Node>& nodes);
  static placement::SchedulerOptions options_of(const Workload& w, const PolicySetup& policy);
  model::PodInfo info(int pod, const std::string& uid) const {
    model::PodInfo i;
    i.uid = uid;
    i.name = w_.pods[pod].name;
    if (movable_ && movable_(uid)) i.movable = model::Movability::kOptedIn;
    return i;
  }
  void changed(std::size_t n) {
    if (track_oracle_) oracle_.update(*ptrs_[n]);
  }

  const Workload& w_;
  const std::vector<int>& priority_;
  const bool track_oracle_;
  placement::FragmentCache oracle_;  // F(M) under the trace's typical pods, for the metrics
  placement::Scheduler sched_;
  std::shared_ptr<const placement::LoadedPolicy> loaded_;
  const placement::Profile& profile_;
  const bool redraw_;  // a strategy reads the per-pod draw (random)
  std::vector<const model::Node*> ptrs_;
  std::vector<std::string> names_;
  std::unordered_map<std::string, std::size_t> index_of_;  // node name -> n
  Rng draws_;
  std::function<bool(const std::string&)> movable_;
};

}  // namespace gapless::bench
