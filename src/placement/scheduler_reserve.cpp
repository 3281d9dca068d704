// The Reserve point: the pick on the chosen node and its commit, the PreReserve and Reserve
// stages around it, other replicas' claims borrowed into the model for the choice; and what
// undoes a reservation (unreserve, release). All under the write lock.
#include "gapless/placement/scheduler.h"

namespace gapless::placement {

Result<model::Allocation> Scheduler::reserve(const model::PodInfo& pod,
                                             const model::GpuRequest& req, const Profile& profile,
                                             const std::string& node,
                                             const std::vector<model::Allocation>& held) {
  auto lock = lock_for_write();
  model::GpuRequest fit = req;
  if (!options_.check_host) fit.host = {};
  // The policy in force now (filter may have run under an older one). PreReserve runs before
  // other replicas' claims are borrowed into the model, so a refusal leaves it untouched.
  const auto current = policy();
  const StageCall c = call(current->policy, pod, req);
  for (const auto& stage : stages_.ordered) {
    if (std::string why = stage->pre_reserve(c, node, &fit); !why.empty()) return Error{why};
  }
  // Counted only while this choice is made, under the same lock: nobody sees them.
  std::vector<std::string> borrowed;
  for (const model::Allocation& a : held) {
    if (a.pod_uid == pod.uid || cluster_.allocation(a.pod_uid) != nullptr) continue;
    if (cluster_.restore(a)) borrowed.push_back(a.pod_uid);
  }
  if (!borrowed.empty()) follow_changes();  // strategies read the node's cached measures
  auto placed = place(cluster_, fit, profile, pod, node);
  for (const std::string& uid : borrowed) cluster_.release(uid);
  if (!borrowed.empty()) follow_changes();
  if (!placed) return placed;
  for (const auto& stage : stages_.ordered) {
    if (std::string why = stage->reserve(c, node, *placed); !why.empty()) return Error{why};
  }
  placed->host = req.host;
  if (Status s = cluster_.commit(*placed); !s) return Error{s.error()};
  follow_changes();
  return placed;
}

bool Scheduler::unreserve(const model::Allocation& reserved) {
  auto lock = lock_for_write();
  const model::Allocation* held = cluster_.allocation(reserved.pod_uid);
  if (held == nullptr || !(*held == reserved)) return false;
  cluster_.release(reserved.pod_uid);
  follow_changes();
  return true;
}

bool Scheduler::release(const std::string& pod_uid) {
  auto lock = lock_for_write();
  const bool released = cluster_.release(pod_uid);
  follow_changes();
  return released;
}

}  // namespace gapless::placement
