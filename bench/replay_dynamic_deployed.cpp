// The dynamic replay as deployed (deployed.h, replay_dynamic_deployed): the dynamic queue of
// replay_dynamic.cpp with every attempt a kube-scheduler cycle (KubeScheduler), what the
// extender's pod informer sees of the pods, and the extender's consolidation driver.
#include <string>

#include "deployed.h"

namespace gapless::bench {

namespace {

class DeployedPath : public DynamicPath {
 public:
  DeployedPath(const std::vector<model::Node>& nodes, const Workload& w, const Arrivals& a,
               const SchedulerConfig& config, ExtenderPort& extender, std::uint64_t seed,
               const DynamicOptions& options, bool unschedulable)
      : w_(w),
        a_(a),
        extender_(extender),
        kube_(nodes, config, extender, seed),
        unschedulable_(unschedulable),
        consolidates_(options.movable > 0),
        movable_(draw_movable(a.order.size(), options.movable, seed)) {
    if (consolidates_) {
      extender_.set_movable([this](const std::string& uid) { return movable_[arrival_of(uid)]; });
    }
  }

  std::size_t node_count() const override { return kube_.node_count(); }
  // The extender hears of the pod at its first filter (or its first condition).
  void arrive(int, const std::string&) override {}
  // kube-scheduler's own filter: where it leaves no node, the cycle fails before the extender.
  bool may_fit(int pod, std::size_t n) const override { return kube_.fits(w_.pods[pod], n); }
  std::size_t start(int pod, const std::string& uid, std::int64_t* granted) override {
    return kube_.schedule(w_.pods[pod], uid, granted);
  }
  // kube-scheduler writes the condition after each failed cycle (a retry it skips here would
  // have failed too: nothing it could use was freed).
  void waiting(int pod, const std::string& uid, double t) override {
    extender_.tick(t);
    if (unschedulable_) extender_.unschedulable(w_.pods[pod], uid);
  }
  void gave_up(int, const std::string& uid) override { extender_.deleted(uid); }
  void left(int pod, const std::string& uid, std::size_t n) override {
    kube_.remove(w_.pods[pod], uid, n);
  }

  // The extender's driver plans for the pod kube-scheduler just found no node for, holds the
  // plan's node and evicts. Each evicted pod is deleted (kube-scheduler's cache and the
  // extender's informer lose it at once: no grace period), and its ReplicaSet's replacement
  // (under the same uid, so the replay and the engine's per-pod cooldown follow it) goes
  // through kube-scheduler at once, the held node refused to it by the extender. The deletions
  // requeue the waiting pod: its cycles follow, each sample starting where the last stopped,
  // until it binds or every node was looked at (kube-scheduler's backoff between them, seconds,
  // is not modelled).
  std::optional<Room> make_room(int pod, const std::string& uid, double t,
                                const LeavesAt& started_at) override {
    if (!consolidates_) return std::nullopt;
    extender_.tick(t);
    const std::vector<ExtenderPort::Eviction> evictions =
        extender_.consolidate(w_.pods[pod], uid, t, started_at);
    if (evictions.empty()) return std::nullopt;
    for (const ExtenderPort::Eviction& e : evictions) {
      kube_.remove(w_.pods[pod_of(e.uid)], e.uid, kube_.index_of(e.node));
    }
    Room room;
    for (const ExtenderPort::Eviction& e : evictions) {
      Moved m{e.uid, 0, 0};
      m.node = kube_.schedule(w_.pods[pod_of(e.uid)], e.uid, &m.granted);
      room.moved.push_back(std::move(m));
    }
    room.node = node_count();
    for (std::size_t cycle = 0; cycle < kube_.cycles_to_cover() && room.node == node_count();
         ++cycle) {
      room.node = kube_.schedule(w_.pods[pod], uid, &room.granted);
    }
    return room;
  }

 private:
  static std::size_t arrival_of(const std::string& uid) { return std::stoul(uid.substr(4)); }
  int pod_of(const std::string& uid) const { return a_.order[arrival_of(uid)]; }

  const Workload& w_;
  const Arrivals& a_;
  ExtenderPort& extender_;
  KubeScheduler kube_;
  const bool unschedulable_;
  const bool consolidates_;
  std::vector<char> movable_;  // per arrival
};

}  // namespace

DynamicRun replay_dynamic_deployed(const std::vector<model::Node>& nodes, const Workload& w,
                                   const Arrivals& a, const SchedulerConfig& config,
                                   ExtenderPort& extender, std::uint64_t seed,
                                   const DynamicOptions& options, bool unschedulable) {
  DeployedPath path(nodes, w, a, config, extender, seed, options, unschedulable);
  return replay_dynamic(nodes, w, a, path, options);
}

}  // namespace gapless::bench
