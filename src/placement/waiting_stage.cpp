#include "gapless/placement/waiting_stage.h"

namespace gapless::placement {

void WaitingStage::filter(const StageCall& call, FilterResult* r,
                          std::vector<const model::Node*>* passed_nodes) const {
  drain_.withhold(call.pod, r, passed_nodes);
}

void WaitingStage::post_score(const StageCall& call, const std::vector<std::string>& nodes,
                              std::vector<double>* raw) const {
  drain_.withhold(call.pod, nodes, raw);
}

void WaitingStage::model_changed(const model::Cluster& cluster,
                                 const model::Cluster::Changes& changes,
                                 const std::vector<const model::Node*>& touched) {
  if (drain_.empty() && drain_.holds().empty()) return;
  // A pod that gained an allocation no longer waits, nor holds a room.
  bool started = false;
  for (const std::string& uid : changes.allocations) {
    if (cluster.allocation(uid) == nullptr) continue;
    const bool released = drain_.release(uid);
    started = drain_.erase(uid) || released || started;
  }
  // After a departure the closest host may be another one: the target is chosen again, among
  // the changed nodes when only they moved.
  if (started || !changes.removed.empty() || !drain_.pick_among(touched, check_host_)) {
    pick(cluster);
  }
}

void WaitingStage::pod_forgotten(const model::Cluster& cluster, const std::string& pod_uid) {
  // A deleted pod waits no more, and the room made for it is free for anyone.
  const bool released = drain_.release(pod_uid);
  if (!stop_waiting(cluster, pod_uid) && released) pick(cluster);
}

void WaitingStage::hold(const model::Cluster& cluster, RoomHold h) {
  drain_.hold(std::move(h));
  pick(cluster);
}

bool WaitingStage::release_room(const model::Cluster& cluster, const std::string& pod_uid) {
  if (!drain_.release(pod_uid)) return false;
  pick(cluster);
  return true;
}

std::size_t WaitingStage::expire_holds(const model::Cluster& cluster, double now_s) {
  if (drain_.holds().empty()) return 0;
  const std::size_t gone = drain_.expire_holds(cluster, now_s);
  if (gone > 0) pick(cluster);
  return gone;
}

bool WaitingStage::may_wait(const model::PodInfo& pod, const model::GpuRequest& req,
                            const Profile& profile) {
  return !pod.uid.empty() && profile.drain_min_gpus > 0 && req.kind == model::RequestKind::kWhole &&
         req.whole >= profile.drain_min_gpus;
}

bool WaitingStage::wait(const StageCall& call, const Profile& profile, double now_s,
                        bool unschedulable) {
  // A pod no node could take even empty waits for nothing a drain can give.
  if (!drain_.contains(call.pod.uid) &&
      pick_drain_target(call.cluster.nodes(), call.req, check_host_) == nullptr) {
    return false;
  }
  const DrainQueue::Waited w =
      drain_.wait(call.pod, call.req, profile.drain_min_gpus, now_s, unschedulable);
  // A newly confirmed pod may be older than the holder.
  if (w == DrainQueue::Waited::kConfirmed) pick(call.cluster);
  return w != DrainQueue::Waited::kNo;
}

bool WaitingStage::stop_waiting(const model::Cluster& cluster, const std::string& pod_uid) {
  const bool was_holder = drain_.reservation() && drain_.reservation()->pod_uid == pod_uid;
  if (!drain_.erase(pod_uid)) return false;
  if (was_holder) pick(cluster);
  return true;
}

std::size_t WaitingStage::expire(const model::Cluster& cluster, double cutoff_s) {
  const std::size_t gone = drain_.expire(cutoff_s);
  if (gone > 0) pick(cluster);
  return gone;
}

void WaitingStage::pick(const model::Cluster& cluster) {
  if (drain_.empty()) {
    drain_.pick({}, check_host_);
    return;
  }
  drain_.pick(cluster.nodes(), check_host_);
}

}  // namespace gapless::placement
