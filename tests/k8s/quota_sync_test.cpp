// Quota usage follows the pods the informers report: a pod bound by anyone (another replica, a
// previous run) counts from its allocation record, and leaves the count when it finishes, is
// deleted, or is missing from a relist. Nothing but the model is consulted.
#include <catch2/catch.hpp>

#include "gapless/k8s/cluster_sync.h"
#include "gapless/placement/scheduler.h"
#include "k8s_objects.h"

namespace gapless::k8s::testing {
namespace {

struct World {
  World() : sched(model::Cluster{}, policy()), sync(hooks()) {
    sync.replace_nodes({topology_node("n1", 8)});
    sync.replace_pods({});
  }

  static placement::Policy policy() {
    placement::Policy p = placement::builtin_policy();
    placement::Quota q;
    q.name = "team-a";
    q.namespaces = {"ml"};
    q.limits[placement::QuotaResource::kWholeGpus] = 3;
    p.quotas.push_back(q);
    return p;
  }
  ClusterSyncHooks hooks() {
    ClusterSyncHooks h;
    h.mutate = [this](const std::function<void(model::Cluster&)>& f) { sched.mutate(f); };
    return h;
  }
  // Whether a pod of ml asking for `gpus` whole GPUs passes filter on n1.
  bool admits(int gpus) {
    model::PodInfo pod;
    pod.ns = "ml";
    pod.uid = "pending";
    model::GpuRequest req;
    req.kind = model::RequestKind::kWhole;
    req.whole = gpus;
    return sched.filter(*sched.policy(), pod, req, {"n1"}).passed.size() == 1;
  }

  placement::Scheduler sched;
  ClusterSync sync;
};

}  // namespace

TEST_CASE("quota usage comes from the informers' pods", "[k8s][sync][quota]") {
  World w;
  CHECK(w.admits(3));
  w.sync.apply_pod("ADDED", bound_pod(whole("u1", "n1", {0, 1})));
  CHECK(w.admits(1));
  CHECK_FALSE(w.admits(2));

  // Finished: its GPUs and its usage are released together.
  w.sync.apply_pod("MODIFIED", bound_pod(whole("u1", "n1", {0, 1}), "Succeeded"));
  CHECK(w.admits(3));

  w.sync.apply_pod("ADDED", bound_pod(whole("u2", "n1", {2, 3, 4})));
  CHECK_FALSE(w.admits(1));
  w.sync.apply_pod("DELETED", bound_pod(whole("u2", "n1", {2, 3, 4})));
  CHECK(w.admits(3));

  // A relist (after a watch gap) is the truth: pods it lacks were deleted meanwhile.
  w.sync.replace_pods({bound_pod(whole("u3", "n1", {5, 6, 7}))});
  CHECK_FALSE(w.admits(1));
  w.sync.replace_pods({});
  CHECK(w.admits(3));
}

}  // namespace gapless::k8s::testing
