// Waiting pods from the pod informer: a pending GPU pod of our scheduler that kube-scheduler
// marked PodScheduled=False/Unschedulable is reported on each event and list that shows it so;
// its wait ends when it is bound, finishes, is deleted, loses the condition, or is gone on a
// relist.
#include <catch2/catch.hpp>
#include <functional>
#include <string>
#include <vector>

#include "gapless/k8s/cluster_sync.h"
#include "k8s_objects.h"

using gapless::k8s::ClusterSync;
using gapless::k8s::ClusterSyncHooks;
using gapless::k8s::ParsedPod;
using gapless::k8s::testing::pod_object;
using gapless::k8s::testing::topology_node;
using gapless::model::Cluster;
using nlohmann::json;

namespace {

// What the sync reported, in order: "wait <uid> <gpus>" and "stop <uid>".
struct Harness {
  Cluster cluster;
  std::vector<std::string> calls;
  ClusterSync sync;

  explicit Harness(std::string scheduler = "gapless-scheduler") : sync(hooks(), scheduler) {
    sync.replace_nodes({topology_node("n1", 8)});
  }
  ClusterSyncHooks hooks() {
    ClusterSyncHooks h;
    h.mutate = [this](const std::function<void(Cluster&)>& f) { f(cluster); };
    h.unschedulable = [this](const ParsedPod& p) {
      calls.push_back("wait " + p.info.uid + " " + std::to_string(p.request.whole));
    };
    h.stop_waiting = [this](const std::string& uid) { calls.push_back("stop " + uid); };
    return h;
  }
  std::vector<std::string> take() { return std::exchange(calls, {}); }
};

json condition(const std::string& status, const std::string& reason,
               const std::string& since = "2026-01-01T10:00:00Z") {
  return {{"type", "PodScheduled"},
          {"status", status},
          {"reason", reason},
          {"message", "0/1 nodes are available: 1 Insufficient nvidia.com/gpu."},
          {"lastTransitionTime", since}};
}

// A pending pod of `scheduler` asking `gpus` whole GPUs (0: none), with `cond` as its only
// condition unless null.
json pending(const std::string& uid, int gpus, const json& cond,
             const std::string& scheduler = "gapless-scheduler") {
  json p = pod_object("pod-" + uid, uid, "");
  json& c = p["spec"]["containers"][0];
  if (gpus > 0) {
    c["resources"]["limits"]["nvidia.com/gpu"] = std::to_string(gpus);
  } else {
    c["resources"] = {{"requests", {{"cpu", "1"}}}};
  }
  p["spec"]["schedulerName"] = scheduler;
  if (!cond.is_null()) p["status"]["conditions"] = json::array({cond});
  return p;
}

json unschedulable(const std::string& uid, int gpus = 8,
                   const std::string& since = "2026-01-01T10:00:00Z") {
  return pending(uid, gpus, condition("False", "Unschedulable", since));
}

}  // namespace

TEST_CASE("wait: our scheduler's Unschedulable GPU pod is reported; others are not",
          "[k8s][sync][waiting]") {
  Harness h;
  h.sync.apply_pod("ADDED", unschedulable("u1"));
  CHECK(h.take() == std::vector<std::string>{"wait u1 8"});
  CHECK(h.sync.unschedulable() == 1);

  h.sync.apply_pod("ADDED",
                   pending("other", 8, condition("False", "Unschedulable"), "default-scheduler"));
  h.sync.apply_pod("ADDED", pending("cpu", 0, condition("False", "Unschedulable")));
  h.sync.apply_pod("ADDED", pending("fresh", 8, nullptr));  // not tried yet
  h.sync.apply_pod("ADDED", pending("error", 8, condition("False", "SchedulerError")));
  h.sync.apply_pod("ADDED", pending("true", 8, condition("True", "")));
  json bound = unschedulable("bound");
  bound["spec"]["nodeName"] = "n1";
  h.sync.apply_pod("ADDED", bound);
  json failed = unschedulable("failed");
  failed["status"]["phase"] = "Failed";
  h.sync.apply_pod("ADDED", failed);
  json bad = unschedulable("bad");
  bad["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "8Gi";
  h.sync.apply_pod("ADDED", bad);
  CHECK(h.take().empty());
  CHECK(h.sync.unschedulable() == 1);
}

TEST_CASE("wait: a name other than the default selects other pods", "[k8s][sync][waiting]") {
  Harness h("gpu-scheduler");
  h.sync.apply_pod("ADDED", unschedulable("ours-by-default"));
  h.sync.apply_pod("ADDED", pending("u2", 4, condition("False", "Unschedulable"), "gpu-scheduler"));
  CHECK(h.take() == std::vector<std::string>{"wait u2 4"});
}

TEST_CASE("wait: binding, a changed condition, finishing and deletion end it",
          "[k8s][sync][waiting]") {
  Harness h;
  for (const char* uid : {"b", "c", "f", "d"}) h.sync.apply_pod("ADDED", unschedulable(uid));
  REQUIRE(h.take().size() == 4);

  // Bound by someone without a Gapless record: no allocation ends the wait, the sync does.
  json bound = unschedulable("b");
  bound["spec"]["nodeName"] = "n1";
  h.sync.apply_pod("MODIFIED", bound);
  CHECK(h.take() == std::vector<std::string>{"stop b"});

  // A bind that failed: kube-scheduler says SchedulerError, some node passed.
  h.sync.apply_pod("MODIFIED", pending("c", 8, condition("False", "SchedulerError")));
  CHECK(h.take() == std::vector<std::string>{"stop c"});

  json finished = unschedulable("f");
  finished["status"]["phase"] = "Failed";
  h.sync.apply_pod("MODIFIED", finished);
  CHECK(h.take() == std::vector<std::string>{"stop f"});

  h.sync.apply_pod("DELETED", unschedulable("d"));
  CHECK(h.take() == std::vector<std::string>{"stop d"});
  CHECK(h.sync.unschedulable() == 0);

  // A pod never reported ends nothing.
  h.sync.apply_pod("DELETED", unschedulable("never", 0));
  CHECK(h.take().empty());
}

TEST_CASE("wait: a relist reports the waiting, longest first, and ends the gone",
          "[k8s][sync][waiting]") {
  Harness h;
  h.sync.apply_pod("ADDED", unschedulable("gone"));
  h.sync.apply_pod("ADDED", unschedulable("stays"));
  h.sync.apply_pod("ADDED", unschedulable("bound-meanwhile"));
  h.take();
  json bound = unschedulable("bound-meanwhile");
  bound["spec"]["nodeName"] = "n1";
  // Listed in name order, as the API server lists; the newer condition first.
  h.sync.replace_pods({bound, unschedulable("a-newer", 8, "2026-01-01T12:00:00Z"),
                       unschedulable("b-older", 8, "2026-01-01T09:00:00Z"),
                       unschedulable("stays", 8, "2026-01-01T10:00:00Z")});
  CHECK(h.take() == std::vector<std::string>{"stop bound-meanwhile", "stop gone", "wait b-older 8",
                                             "wait stays 8", "wait a-newer 8"});
  CHECK(h.sync.unschedulable() == 3);

  // A list of nodes reports them again (a pod judged before its nodes were known may wait now).
  h.sync.replace_nodes({topology_node("n1", 8), topology_node("n2", 8)});
  CHECK(h.take() == std::vector<std::string>{"wait b-older 8", "wait stays 8", "wait a-newer 8"});
  // A node event alone does not.
  h.sync.apply_node("ADDED", topology_node("n3", 8));
  CHECK(h.take().empty());
}

TEST_CASE("wait: without the hook nothing is tracked", "[k8s][sync][waiting]") {
  Cluster cluster;
  ClusterSyncHooks hooks;
  hooks.mutate = [&](const std::function<void(Cluster&)>& f) { f(cluster); };
  ClusterSync sync(hooks);
  sync.apply_pod("ADDED", unschedulable("u1"));
  CHECK(sync.unschedulable() == 0);
}
