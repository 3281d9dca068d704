// Waiting pods and the drain target as a stage of the runner (placement/stage.h); the queue and
// the choice of the target are placement/drain.h.
//
// A pod whose Filter passed no node waits. It is recorded (once per UID, oldest first; a later
// call refreshes its clock) when its profile reserves for pods of its size
// (Profile::drain_min_gpus), no PreFilter refuses it (a pod its quota refuses waits for the
// quota, not for a node) and some node could take it once emptied. The oldest pod found waiting
// twice holds the drain target, chosen again after every change of the model (after a departure
// the closest host may be another one).
//
//   Filter         the target is unresolvable for other pods of no higher priority
//   PostScore      ... and scores -1 for them (drivers that pick the best score themselves)
//   ModelChanged   a pod that gained an allocation waits no more; the target is re-picked
//   PodForgotten   a deleted pod waits no more, and its held room (below) ends
//
// Consolidation's held rooms (drain.h RoomHold) are withheld the same way: a node a driver
// freed for one waiting pod by evicting pods (Scheduler::hold_room), until the pod gets an
// allocation, is deleted, or the hold runs out (expire_holds). A waiting pod holding a room
// has it as its drain target.
//
// Thread-safety: as Stage; the waiting calls below follow the runner's lock (write; read for
// the const ones).
#pragma once

#include "gapless/placement/drain.h"
#include "gapless/placement/stage.h"

namespace gapless::placement {

class WaitingStage final : public Stage {
 public:
  // `check_host`: whether the drain distance counts CPU and memory (make_stages: always, even
  // when SchedulerOptions::check_host is off).
  explicit WaitingStage(bool check_host) : check_host_(check_host) {}

  std::string_view name() const override { return "waiting"; }
  void filter(const StageCall& call, FilterResult* r,
              std::vector<const model::Node*>* passed_nodes) const override;
  void post_score(const StageCall& call, const std::vector<std::string>& nodes,
                  std::vector<double>* raw) const override;
  void model_changed(const model::Cluster& cluster, const model::Cluster::Changes& changes,
                     const std::vector<const model::Node*>& touched) override;
  void pod_forgotten(const model::Cluster& cluster, const std::string& pod_uid) override;

  // Whether the pod is of a kind and size its profile reserves for (no lock needed: most
  // failed filters are of pods too small, and are answered without one).
  static bool may_wait(const model::PodInfo& pod, const model::GpuRequest& req,
                       const Profile& profile);
  bool contains(const std::string& pod_uid) const { return drain_.contains(pod_uid); }
  // Records or refreshes the wait. REQUIRES: may_wait, the pod holds no allocation, and no
  // PreFilter refuses it unless it is already waiting. `unschedulable`: the pod itself says
  // kube-scheduler found no node for it (confirmed at once, never expires).
  bool wait(const StageCall& call, const Profile& profile, double now_s, bool unschedulable);
  // The pod no longer waits. Returns whether it was waiting.
  bool stop_waiting(const model::Cluster& cluster, const std::string& pod_uid);
  // Forgets the pods whose last wait was before `cutoff_s`. Returns how many.
  std::size_t expire(const model::Cluster& cluster, double cutoff_s);
  bool any_before(double cutoff_s) const { return drain_.any_before(cutoff_s); }
  // Holds a room for a pod (RoomHold), the target chosen again after.
  void hold(const model::Cluster& cluster, RoomHold h);
  // Ends the pod's hold, the target chosen again; whether it had one.
  bool release_room(const model::Cluster& cluster, const std::string& pod_uid);
  // Ends the holds whose time is over at now_s (drain.h DrainQueue::expire_holds); how many.
  std::size_t expire_holds(const model::Cluster& cluster, double now_s);
  const std::vector<RoomHold>& holds() const { return drain_.holds(); }
  std::vector<std::string> withheld_from(const model::PodInfo& pod) const {
    return drain_.withheld_from(pod);
  }
  const std::optional<DrainReservation>& reservation() const { return drain_.reservation(); }
  std::size_t size() const { return drain_.size(); }

 private:
  // The drain target chosen again for the model as it is.
  void pick(const model::Cluster& cluster);

  const bool check_host_;
  DrainQueue drain_;
};

}  // namespace gapless::placement
