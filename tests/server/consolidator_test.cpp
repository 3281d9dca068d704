// server::Consolidator against the fake API server: a waiting GPU pod that fits no node gets the
// engine's plan carried out through the Eviction API (dry run first), a budget's 429 makes it
// pick another plan or wait, and nothing is evicted by a replica that does not lead, under a
// policy that leaves consolidation off, for a pod that fits, twice for one pod while its
// evictions still terminate, or of a bare pod.
#include "gapless/server/consolidator.h"

#include <catch2/catch.hpp>

#include "../k8s/k8s_objects.h"
#include "fake_api_server.h"
#include "gapless/k8s/cluster_sync.h"
#include "gapless/k8s/scheduler_lease.h"
#include "gapless/policy/loader.h"
#include "policy_text.h"

namespace gapless::server {
namespace {

using nlohmann::json;
using Clock = Consolidator::Clock;
namespace kt = k8s::testing;

placement::Policy policy(const std::string& consolidation) {
  auto p = policy::parse_policy(test::policy_head() + consolidation, "test.yaml");
  REQUIRE(p.ok());
  return *p;
}

const std::string kOn = "consolidation:\n  enabled: true\n";

// A pod of namespace "ml" holding `gpus` of 4-GPU node `node`, owned by a ReplicaSet (or by
// nothing when `bare`), annotated gapless.io/movable: "true".
json holder(const std::string& name, const std::string& node, std::initializer_list<int> gpus,
            bool bare = false, const std::string& started = "") {
  model::Allocation a = kt::whole("uid-" + name, node, gpus);
  a.pod_name = name;
  json pod = kt::bound_pod(a);
  if (!started.empty()) pod["status"]["startTime"] = started;
  pod["metadata"]["annotations"]["gapless.io/movable"] = "true";
  pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] =
      std::to_string(gpus.size());
  if (!bare) {
    pod["metadata"]["ownerReferences"] = json::array({{{"apiVersion", "apps/v1"},
                                                       {"kind", "ReplicaSet"},
                                                       {"name", "rs"},
                                                       {"controller", true}}});
  }
  return pod;
}

// A pending pod of gapless-scheduler asking 4 GPUs that kube-scheduler found no node for.
json waiting_pod(const std::string& name) {
  json pod = kt::pod_object(name, "uid-" + name, "");
  pod["spec"]["schedulerName"] = "gapless-scheduler";
  pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "4";
  pod["status"]["conditions"] = json::array({{{"type", "PodScheduled"},
                                              {"status", "False"},
                                              {"reason", "Unschedulable"},
                                              {"lastTransitionTime", "2026-11-28T10:00:00Z"}}});
  return pod;
}

// Three 4-GPU nodes: n1 holds a (2 GPUs), n2 holds c (2 GPUs), n3 holds e (2 GPUs); a 4-GPU pod
// fits none. Evicting a (or c) frees a node, and the pod moved fits on n3 (or the other one).
// `c_younger`: a and c say when they started (status.startTime), c six hours after a.
struct Cluster {
  explicit Cluster(const std::string& consolidation = kOn, bool bare = false,
                   Consolidator::Leads leads = nullptr, bool c_younger = false)
      : client(api.client_config()),
        scheduler(model::Cluster{}, policy(consolidation)),
        consolidator(scheduler, client, std::move(leads), nullptr, options()),
        sync(hooks()) {
    for (const char* n : {"n1", "n2", "n3"}) {
      const json node = kt::topology_node(n, 4);
      api.add_node(node);
      sync.apply_node("ADDED", node);
    }
    add(holder("a", "n1", {0, 1}, bare, c_younger ? "2026-01-01T00:00:00Z" : ""));
    add(holder("c", "n2", {0, 1}, bare, c_younger ? "2026-01-01T06:00:00Z" : ""));
    add(holder("e", "n3", {0, 1}, true));  // bare: never evicted, annotation or not
    add(waiting_pod("w"));
  }
  static ConsolidatorOptions options() {
    ConsolidatorOptions o;
    o.backoff = std::chrono::seconds(10);
    return o;
  }
  k8s::ClusterSyncHooks hooks() {
    k8s::ClusterSyncHooks h;
    h.mutate = [this](const std::function<void(model::Cluster&)>& f) { scheduler.mutate(f); };
    h.unschedulable = [this](const k8s::ParsedPod& p) { consolidator.waiting(p); };
    h.stop_waiting = [this](const std::string& uid) { consolidator.stopped(uid); };
    return h;
  }
  void add(const json& pod) {
    api.add_pod(pod);
    sync.apply_pod("ADDED", pod);
  }
  // What the pod informer would deliver after the API server changed the pod.
  void refresh(const std::string& name) {
    auto pod = api.pod("ml", name);
    REQUIRE(pod);
    sync.apply_pod("MODIFIED", *pod);
  }
  void remove(const std::string& name) {
    auto pod = api.pod("ml", name);
    REQUIRE(pod);
    api.delete_pod("ml", name);
    sync.apply_pod("DELETED", *pod);
  }
  // Events on pod `name` with this reason.
  std::vector<std::string> events(const std::string& name, const std::string& reason) const {
    std::vector<std::string> out;
    for (const json& e : api.events()) {
      if (e["involvedObject"].value("name", "") == name && e.value("reason", "") == reason) {
        out.push_back(e.value("message", ""));
      }
    }
    return out;
  }

  test::FakeApiServer api;
  k8s::ApiClient client;
  placement::Scheduler scheduler;
  Consolidator consolidator;
  k8s::ClusterSync sync;
  Clock::time_point t0 = Clock::now();
};

const std::string kEviction = "/api/v1/namespaces/ml/pods/";

model::GpuRequest gpus_request(int n) {
  model::GpuRequest r;
  r.kind = model::RequestKind::kWhole;
  r.whole = n;
  return r;
}

TEST_CASE("consolidation: the plan is carried out through the Eviction API, once",
          "[server][consolidation]") {
  Cluster c;
  REQUIRE(c.consolidator.tracked() == std::vector<std::string>{"ml/w"});
  CHECK(c.consolidator.step(false, c.t0) == 0);  // not ready: nothing
  CHECK(c.api.count_requests("POST", kEviction) == 0);

  REQUIRE(c.consolidator.step(true, c.t0) == 1);
  CHECK(c.api.evictions() == std::vector<std::string>{"ml/a"});
  CHECK(c.api.count_requests("POST", kEviction + "a/eviction") == 2);  // dry run, then real
  CHECK(c.api.pod("ml", "a")->at("metadata").contains("deletionTimestamp"));
  REQUIRE(c.events("a", "ConsolidationEviction").size() == 1);
  CHECK_THAT(c.events("a", "ConsolidationEviction")[0], Catch::Contains("ml/w"));
  REQUIRE(c.events("w", "ConsolidationPlan").size() == 1);
  CHECK_THAT(c.events("w", "ConsolidationPlan")[0],
             Catch::Contains("evicted ml/a (to node") && Catch::Contains("from node n1"));

  // a terminates slowly: later steps evict nothing more for w.
  c.refresh("a");
  for (int s = 1; s <= 3; ++s)
    CHECK(c.consolidator.step(true, c.t0 + std::chrono::minutes(s)) == 0);
  CHECK(c.api.evictions().size() == 1);
  // a is gone: w fits n1 now, so nothing is evicted for it (kube-scheduler places it).
  c.remove("a");
  CHECK(c.consolidator.step(true, c.t0 + std::chrono::minutes(5)) == 0);
  CHECK(c.api.evictions().size() == 1);
  CHECK(c.events("w", "ConsolidationPlan").size() == 1);
}

TEST_CASE("consolidation: of two one-eviction plans, the younger pod's (least GPU-time lost)",
          "[server][consolidation]") {
  // Without start times the tie goes to node names: a, on n1 (the test above).
  Cluster c(kOn, false, nullptr, true);
  REQUIRE(c.consolidator.step(true, c.t0) == 1);
  CHECK(c.api.evictions() == std::vector<std::string>{"ml/c"});
  REQUIRE(c.events("w", "ConsolidationPlan").size() == 1);
  CHECK_THAT(c.events("w", "ConsolidationPlan")[0], Catch::Contains("from node n2"));
}

TEST_CASE("consolidation: the freed node is held for the waiting pod, not its replacements",
          "[server][consolidation]") {
  Cluster c;
  REQUIRE(c.consolidator.step(true, c.t0) == 1);
  REQUIRE(c.api.evictions() == std::vector<std::string>{"ml/a"});
  c.refresh("a");
  c.remove("a");  // n1 is empty now
  const auto loaded = c.scheduler.policy();
  const placement::Profile& profile = loaded->policy.profiles.front();
  const std::vector<std::string> nodes{"n1", "n2", "n3"};
  model::PodInfo replacement;
  replacement.ns = "ml";
  replacement.name = "a-2";
  replacement.uid = "uid-a-2";
  model::PodInfo w = replacement;
  w.name = "w";
  w.uid = "uid-w";
  const auto passes = [&](const model::PodInfo& p, int gpus) {
    return c.scheduler.filter(*loaded, p, gpus_request(gpus), profile, nodes).passed;
  };
  // The controller's new pod goes elsewhere; the waiting pod gets n1.
  CHECK(passes(replacement, 2) == std::vector<std::string>{"n2", "n3"});
  CHECK(passes(w, 4) == std::vector<std::string>{"n1"});
  CHECK(c.consolidator.step(true, c.t0 + std::chrono::seconds(59)) == 0);
  CHECK(passes(replacement, 2) == std::vector<std::string>{"n2", "n3"});

  SECTION("holdSeconds (60) after the plan, the hold ends") {
    CHECK(c.consolidator.step(true, c.t0 + std::chrono::seconds(60)) == 0);
    CHECK(c.scheduler.holds().empty());
    CHECK(passes(replacement, 2) == nodes);
  }
  SECTION("the waiting pod bound there ends it") {
    REQUIRE(c.scheduler.reserve(w, gpus_request(4), profile, "n1"));
    CHECK(c.scheduler.holds().empty());
  }
}

TEST_CASE("consolidation: a budget's 429 makes it pick another plan, or wait",
          "[server][consolidation]") {
  Cluster c;
  SECTION("another plan") {
    c.api.fail_next("POST", kEviction + "a/eviction", 1, 429,
                    "Cannot evict pod as it would violate the pod's disruption budget.");
    REQUIRE(c.consolidator.step(true, c.t0) == 1);
    CHECK(c.api.evictions() == std::vector<std::string>{"ml/c"});
    REQUIRE(c.events("w", "ConsolidationBlocked").size() == 1);
    CHECK_THAT(c.events("w", "ConsolidationBlocked")[0], Catch::Contains("ml/a"));
    CHECK(c.consolidator.blocked_total() == 1);
  }
  SECTION("no other plan: it waits, then tries again after the backoff") {
    c.api.fail_next("POST", kEviction + "a/eviction", 1, 429, "budget");
    c.api.fail_next("POST", kEviction + "c/eviction", 1, 429, "budget");
    CHECK(c.consolidator.step(true, c.t0) == 0);
    CHECK(c.api.evictions().empty());
    const auto blocked = c.events("w", "ConsolidationBlocked");
    REQUIRE(blocked.size() == 3);
    CHECK_THAT(blocked.back(), Catch::Contains("no other plan: waiting"));
    CHECK(c.consolidator.step(true, c.t0 + std::chrono::seconds(5)) == 0);  // backing off
    CHECK(c.api.count_requests("POST", kEviction) == 2);
    // Past the backoff, but a and c are still refused for blocked_for: it keeps waiting.
    CHECK(c.consolidator.step(true, c.t0 + std::chrono::seconds(11)) == 0);
    CHECK(c.api.count_requests("POST", kEviction) == 2);
    // Once blocked_for is over, a is asked again, and the budget allows it now.
    CHECK(c.consolidator.step(true, c.t0 + std::chrono::minutes(6)) == 1);
    CHECK(c.api.evictions() == std::vector<std::string>{"ml/a"});
  }
}

TEST_CASE("consolidation: only the leader's replica evicts", "[server][consolidation]") {
  std::unique_ptr<k8s::SchedulerLease> lease;
  Cluster c(kOn, false, [&](Clock::time_point now) { return lease->leads(now); });
  k8s::LeaseOptions o;
  o.lease_namespace = "gapless-system";
  o.lease_name = "gapless-scheduler";
  o.replica_name = "gapless-scheduler-7d9f-abcde";
  o.if_unreadable = false;
  o.recheck = std::chrono::milliseconds(0);
  lease = std::make_unique<k8s::SchedulerLease>(c.client, o, "consolidation");
  CHECK(c.consolidator.step(true, c.t0) == 0);  // no Lease: nobody leads
  c.api.set_lease("gapless-system", "gapless-scheduler", "gapless-scheduler-other_1f2e");
  CHECK(c.consolidator.step(true, c.t0 + std::chrono::seconds(1)) == 0);
  c.api.fail_next("GET", "/apis/coordination.k8s.io/", 1, 500);
  c.api.set_lease("gapless-system", "gapless-scheduler", "gapless-scheduler-7d9f-abcde_0a1b");
  CHECK(c.consolidator.step(true, c.t0 + std::chrono::seconds(2)) == 0);  // unreadable: no
  CHECK(c.api.count_requests("POST", kEviction) == 0);
  CHECK(c.consolidator.step(true, c.t0 + std::chrono::seconds(3)) == 1);
  CHECK(c.api.evictions() == std::vector<std::string>{"ml/a"});
}

TEST_CASE("consolidation: nothing is evicted with the policy off, in dry run, or of bare pods",
          "[server][consolidation]") {
  SECTION("policy off") {
    Cluster c("consolidation:\n  enabled: false\n");
    CHECK(c.consolidator.step(true, c.t0) == 0);
    CHECK(c.api.count_requests("POST", kEviction) == 0);
    CHECK(c.api.events().empty());
  }
  SECTION("dry run: the plan as an Event, once") {
    Cluster c("consolidation:\n  enabled: true\n  dryRun: true\n");
    CHECK(c.consolidator.step(true, c.t0) == 0);
    CHECK(c.consolidator.step(true, c.t0 + std::chrono::minutes(1)) == 0);
    CHECK(c.api.count_requests("POST", kEviction) == 0);
    REQUIRE(c.events("w", "ConsolidationDryRun").size() == 1);
    CHECK_THAT(c.events("w", "ConsolidationDryRun")[0], Catch::Contains("would evict ml/a"));
  }
  SECTION("bare pods, annotated movable or not") {
    Cluster c(kOn, true);
    CHECK(c.consolidator.step(true, c.t0) == 0);
    CHECK(c.api.count_requests("POST", kEviction) == 0);
  }
}

TEST_CASE("consolidation: a pod that fits gets no evictions, and a bound one is forgotten",
          "[server][consolidation]") {
  Cluster c;
  c.remove("c");  // n2 is free: w fits as it is
  CHECK(c.consolidator.step(true, c.t0) == 0);
  CHECK(c.api.count_requests("POST", kEviction) == 0);
  c.remove("w");
  CHECK(c.consolidator.tracked().empty());
}

TEST_CASE("consolidation: a plan of more API calls than a second's worth still goes",
          "[server][consolidation]") {
  // n1: three movable 1-GPU pods; n2 and n3 each keep a bare pod. The only plan evicts all three
  // of n1's (6 calls: dry runs, then evictions), more than the 5 a second the bucket holds.
  Cluster c;
  c.remove("a");
  c.remove("c");
  c.add(holder("a1", "n1", {0}));
  c.add(holder("a2", "n1", {1}));
  c.add(holder("a3", "n1", {2}));
  c.add(holder("b", "n2", {0}, true));
  REQUIRE(c.consolidator.step(true, c.t0) == 3);
  CHECK(c.api.evictions().size() == 3);
  CHECK(c.api.count_requests("POST", kEviction) == 6);
}

}  // namespace
}  // namespace gapless::server
