// The runner's calls that only take its lock and ask one stage's own API (waiting_stage.h,
// quota_stage.h, learned_mix_stage.h, consolidation_stage.h) or read the live summary.
#include "gapless/placement/scheduler.h"

namespace gapless::placement {

bool Scheduler::wait(const model::PodInfo& pod, const model::GpuRequest& req,
                     const Profile& profile, double now_s, WaitSource source) {
  if (!WaitingStage::may_wait(pod, req, profile)) return false;  // no lock for most pods
  const auto loaded = policy();
  auto lock = lock_for_write();
  if (cluster_.allocation(pod.uid) != nullptr) return false;
  const StageCall c = call(loaded->policy, pod, req);
  if (!stages_.waiting->contains(pod.uid)) {
    // A pod a PreFilter refuses (its quota) waits for that, not for a node: it must not hold one.
    for (const auto& stage : stages_.ordered) {
      if (stage->pre_filter(c)) return false;
    }
  }
  return stages_.waiting->wait(c, profile, now_s, source == WaitSource::kUnschedulable);
}

bool Scheduler::stop_waiting(const std::string& pod_uid) {
  auto lock = lock_for_write();
  return stages_.waiting->stop_waiting(cluster_, pod_uid);
}

std::size_t Scheduler::expire_waiting(double cutoff_s) {
  {
    std::shared_lock lock(mu_);
    if (!stages_.waiting->any_before(cutoff_s)) return 0;
  }
  auto lock = lock_for_write();
  return stages_.waiting->expire(cluster_, cutoff_s);
}

ConsolidationSearch Scheduler::consolidate(const model::PodInfo& pod, const model::GpuRequest& req,
                                           const Profile& profile, double now_s,
                                           const RequestOf& request_of, const StartedAt& started_at,
                                           const MayMove& may_move) const {
  // CPU and memory are checked even behind kube-scheduler (check_host off): its NodeResourcesFit
  // never sees a plan's what-if. A node with the GPUs free but not the cores is no room: counted
  // as "fits now", nothing was moved for the pod and kube-scheduler never placed it; and a plan
  // could free GPUs where the pod's cores are not, or send a moved pod where its cores are not.
  // The model counts every pod's requests (ClusterSync::account_host_only).
  const auto loaded = policy();
  ConsolidationQuery q;
  q.rules = loaded->policy.consolidation;
  q.now_s = now_s;
  q.check_host = true;
  q.request_of = request_of;
  q.started_at = started_at;
  q.may_move = may_move;
  std::shared_lock lock(mu_);
  q.withheld = stages_.waiting->withheld_from(pod);
  const StageCall c = call(loaded->policy, pod, req);
  ConsolidationSearch out;
  for (const auto& stage : stages_.ordered) {
    if (stage->consolidate(c, profile, q, &out)) return out;
  }
  return out;
}

void Scheduler::moves_made(const ConsolidationPlan& plan, double now_s) {
  const auto loaded = policy();
  auto lock = lock_for_write();
  stages_.consolidation->moves_made(plan, now_s, loaded->policy.consolidation);
}

void Scheduler::hold_room(const model::PodInfo& pod, const ConsolidationPlan& plan, double now_s) {
  const auto loaded = policy();
  const double hold_s = loaded->policy.consolidation.hold_s;
  auto lock = lock_for_write();
  if (pod.uid.empty() || cluster_.allocation(pod.uid) != nullptr) return;  // nothing to hold for
  RoomHold h{{pod.uid, pod.priority, plan.node}, {}, hold_s, now_s + hold_s};
  for (const PlannedMove& m : plan.moves) {
    if (cluster_.allocation(m.pod_uid) != nullptr) h.evicted.push_back(m.pod_uid);
  }
  stages_.waiting->hold(cluster_, std::move(h));
}

bool Scheduler::release_room(const std::string& pod_uid) {
  auto lock = lock_for_write();
  return stages_.waiting->release_room(cluster_, pod_uid);
}

std::size_t Scheduler::expire_holds(double now_s) {
  {
    std::shared_lock lock(mu_);
    if (stages_.waiting->holds().empty()) return 0;
  }
  auto lock = lock_for_write();
  return stages_.waiting->expire_holds(cluster_, now_s);
}

std::vector<RoomHold> Scheduler::holds() const {
  std::shared_lock lock(mu_);
  return stages_.waiting->holds();
}

std::optional<DrainReservation> Scheduler::drain() const {
  std::shared_lock lock(mu_);
  return stages_.waiting->reservation();
}

std::size_t Scheduler::waiting() const {
  std::shared_lock lock(mu_);
  return stages_.waiting->size();
}

WorkloadMix Scheduler::mix() const {
  std::shared_lock lock(mu_);
  return stages_.mix->mix();
}

std::size_t Scheduler::observed() const {
  std::shared_lock lock(mu_);
  return stages_.mix->observed();
}

std::vector<QuotaRow> Scheduler::quota_rows() const {
  const auto loaded = policy();
  std::shared_lock lock(mu_);
  const model::PodInfo none;
  return stages_.quotas->rows(loaded->policy.quotas, call(loaded->policy, none, {}).cluster_gpus);
}

std::string Scheduler::quota_never_fits(const model::PodInfo& pod,
                                        const model::GpuRequest& req) const {
  const auto loaded = policy();
  if (loaded->policy.quotas.empty()) return "";
  std::shared_lock lock(mu_);
  return stages_.quotas->never_fits(loaded->policy.quotas,
                                    call(loaded->policy, pod, req).cluster_gpus, pod.ns,
                                    quota_demand(req));
}

void Scheduler::set_namespaces(NamespaceLabels all) {
  auto lock = lock_for_write();
  stages_.quotas->set_namespaces(std::move(all));
}

void Scheduler::set_namespace(const std::string& ns, model::Labels labels) {
  auto lock = lock_for_write();
  stages_.quotas->set_namespace(ns, std::move(labels));
}

void Scheduler::erase_namespace(const std::string& ns) {
  auto lock = lock_for_write();
  stages_.quotas->erase_namespace(ns);
}

ClusterSummary Scheduler::summary() const {
  std::shared_lock lock(mu_);
  return summary_.total();
}

}  // namespace gapless::placement
