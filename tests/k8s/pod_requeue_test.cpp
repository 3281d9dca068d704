// PodRequeue: the pods kube-scheduler parked after an extender error get the gapless.io/requeue
// annotation once the extender is ready, only those, only from the leader, rate-limited.
#include "gapless/k8s/pod_requeue.h"

#include <catch2/catch.hpp>
#include <thread>

#include "eventually.h"
#include "fake_api_server.h"
#include "gapless/k8s/informer.h"

namespace gapless::k8s {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;
using Clock = PodRequeue::Clock;

// A pending pod as kube-scheduler v1.26 leaves it after a failed attempt: PodScheduled False with
// `reason` ("SchedulerError" when the extender call failed, "Unschedulable" when no node fit).
json waiting_pod(const std::string& name, const std::string& reason = "SchedulerError",
                 const std::string& scheduler = "gapless-scheduler", const std::string& ns = "ml") {
  return json{{"metadata", {{"name", name}, {"namespace", ns}, {"uid", "uid-" + ns + "-" + name}}},
              {"spec", {{"schedulerName", scheduler}, {"containers", json::array()}}},
              {"status",
               {{"phase", "Pending"},
                {"conditions",
                 {{{"type", "PodScheduled"},
                   {"status", "False"},
                   {"reason", reason},
                   {"message", "Post \"http://127.0.0.1:8888/filter\": connection refused"},
                   {"lastTransitionTime", "2026-11-27T10:00:00Z"}}}}}}};
}

std::string annotation(const test::FakeApiServer& api, const std::string& name,
                       const std::string& ns = "ml") {
  auto pod = api.pod(ns, name);
  if (!pod) return "<gone>";
  const json& a = (*pod)["metadata"].value("annotations", json::object());
  return a.value(kRequeueAnnotation, "");
}

RequeueOptions leader_options() {
  RequeueOptions o;
  o.lease_namespace = "gapless-system";
  o.lease_name = "gapless-scheduler";
  o.replica_name = "gapless-scheduler-7d9f-abcde";
  return o;
}

TEST_CASE("requeue: which pods count as parked by an extender error", "[k8s][requeue]") {
  CHECK(parked_by_error(waiting_pod("a"), "gapless-scheduler"));
  CHECK_FALSE(parked_by_error(waiting_pod("a", "Unschedulable"), "gapless-scheduler"));
  CHECK_FALSE(parked_by_error(waiting_pod("a", "SchedulerError", "default-scheduler"),
                              "gapless-scheduler"));
  json bound = waiting_pod("a");
  bound["spec"]["nodeName"] = "n1";
  CHECK_FALSE(parked_by_error(bound, "gapless-scheduler"));
  json deleting = waiting_pod("a");
  deleting["metadata"]["deletionTimestamp"] = "2026-11-27T10:00:01Z";
  CHECK_FALSE(parked_by_error(deleting, "gapless-scheduler"));
  json scheduled = waiting_pod("a");
  scheduled["status"]["conditions"][0]["status"] = "True";
  CHECK_FALSE(parked_by_error(scheduled, "gapless-scheduler"));
  json fresh = waiting_pod("a");  // never tried: kube-scheduler's queue still holds it
  fresh["status"].erase("conditions");
  CHECK_FALSE(parked_by_error(fresh, "gapless-scheduler"));
  // Malformed objects are not parked pods, and do not throw.
  CHECK_FALSE(parked_by_error(json("x"), "gapless-scheduler"));
  CHECK_FALSE(parked_by_error(json{{"spec", 1}, {"status", {{"conditions", "x"}}}}, "s"));
}

TEST_CASE("requeue: the lease holder is kube-scheduler's host name, then _uuid", "[k8s][requeue]") {
  CHECK(lease_held_by("sched-abc_0f1e2d", "sched-abc"));
  CHECK(lease_held_by("sched-abc", "sched-abc"));
  CHECK_FALSE(lease_held_by("sched-abcd_0f1e2d", "sched-abc"));
  CHECK_FALSE(lease_held_by("other_0f1e2d", "sched-abc"));
  CHECK_FALSE(lease_held_by("", "sched-abc"));
  CHECK_FALSE(lease_held_by("sched-abc_1", ""));
}

TEST_CASE("requeue: the leader annotates exactly its scheduler's errored pods, once per window",
          "[k8s][requeue]") {
  test::FakeApiServer api;
  ApiClient client(api.client_config());
  std::vector<json> pods = {
      waiting_pod("errored"),
      waiting_pod("errored-elsewhere", "SchedulerError", "gapless-scheduler", "team-b"),
      waiting_pod("unschedulable", "Unschedulable"),
      waiting_pod("other-scheduler", "SchedulerError", "default-scheduler")};
  json bound = waiting_pod("bound");
  bound["spec"]["nodeName"] = "n1";
  pods.push_back(bound);
  for (const json& p : pods) api.add_pod(p);
  api.set_lease("gapless-system", "gapless-scheduler", "gapless-scheduler-7d9f-abcde_4b1c");

  std::vector<std::string> logs;
  PodRequeue requeue(client, leader_options(), [&](const std::string& m) { logs.push_back(m); });
  requeue.on_list(pods);
  CHECK(requeue.parked() == std::vector<std::string>{"ml/errored", "team-b/errored-elsewhere"});

  const auto t0 = Clock::now();
  CHECK(requeue.step(false, t0) == 0);  // not ready: nothing
  CHECK(api.count_requests("PATCH", "/api/v1/namespaces") == 0);
  CHECK(requeue.step(true, t0) == 2);
  CHECK_FALSE(annotation(api, "errored").empty());
  CHECK_FALSE(annotation(api, "errored-elsewhere", "team-b").empty());
  for (const char* untouched : {"unschedulable", "other-scheduler", "bound"})
    CHECK(annotation(api, untouched).empty());
  CHECK(requeue.patched_total() == 2);
  CHECK(requeue.failed_total() == 0);

  // Still parked (kube-scheduler has not retried yet), but already nudged in this window.
  CHECK(requeue.step(true, t0 + milliseconds(2000)) == 0);
  CHECK(api.count_requests("PATCH", "/api/v1/namespaces") == 2);

  // A pod whose error arrives by watch during the window is nudged too.
  api.add_pod(waiting_pod("late"));
  requeue.on_event("ADDED", waiting_pod("late"));
  CHECK(requeue.step(true, t0 + milliseconds(3000)) == 1);
  CHECK_FALSE(annotation(api, "late").empty());

  // After the window: nothing, whatever is parked.
  requeue.on_event("ADDED", waiting_pod("after"));
  api.add_pod(waiting_pod("after"));
  CHECK(requeue.step(true, t0 + milliseconds(61000)) == 0);
  CHECK(annotation(api, "after").empty());

  // Not ready, then ready again (the extender lost its model and rebuilt it): a new window.
  CHECK(requeue.step(false, t0 + milliseconds(62000)) == 0);
  CHECK(requeue.step(true, t0 + milliseconds(63000)) == 4);
  CHECK_FALSE(annotation(api, "after").empty());

  // A pod that stops being parked (retried, now Unschedulable) or is deleted is dropped.
  requeue.on_event("MODIFIED", waiting_pod("errored", "Unschedulable"));
  requeue.on_event("DELETED", waiting_pod("late"));
  CHECK(requeue.parked() == std::vector<std::string>{"ml/after", "team-b/errored-elsewhere"});
}

TEST_CASE("requeue: a standby replica, or no leader at all, annotates nothing", "[k8s][requeue]") {
  test::FakeApiServer api;
  ApiClient client(api.client_config());
  api.add_pod(waiting_pod("errored"));
  PodRequeue requeue(client, leader_options());
  requeue.on_list({waiting_pod("errored")});

  SECTION("the other replica holds the lease") {
    api.set_lease("gapless-system", "gapless-scheduler", "gapless-scheduler-7d9f-zzzzz_77aa");
    CHECK(requeue.step(true, Clock::now()) == 0);
  }
  SECTION("no lease yet") {
    CHECK(requeue.step(true, Clock::now()) == 0);
  }
  CHECK(api.count_requests("PATCH", "/api/v1/namespaces") == 0);
  CHECK(annotation(api, "errored").empty());
  CHECK(api.count_requests("GET", "/apis/coordination.k8s.io/") == 1);
}

TEST_CASE("requeue: patches are rate-limited and bounded per window", "[k8s][requeue]") {
  test::FakeApiServer api;
  ApiClient client(api.client_config());
  std::vector<json> pods;
  for (int i = 0; i < 30; ++i) {
    pods.push_back(waiting_pod("p" + std::to_string(i)));
    api.add_pod(pods.back());
  }
  RequeueOptions o;  // no lease: every replica nudges, no lease request
  o.per_second = 10;
  o.max_per_window = 25;
  PodRequeue requeue(client, o);
  requeue.on_list(pods);

  const auto t0 = Clock::now();
  CHECK(requeue.step(true, t0) == 10);                        // the burst
  CHECK(requeue.step(true, t0) == 0);                         // no time, no tokens
  CHECK(requeue.step(true, t0 + milliseconds(500)) == 5);     // half a second's worth
  CHECK(requeue.step(true, t0 + milliseconds(10500)) == 10);  // the burst again, no more
  CHECK(requeue.step(true, t0 + milliseconds(20500)) == 0);   // 25 in this window: done
  CHECK(api.count_requests("PATCH", "/api/v1/namespaces/ml/pods/") == 25);
  CHECK(api.count_requests("GET", "/apis/coordination.k8s.io/") == 0);
}

TEST_CASE("requeue: API errors are counted and logged, never fatal", "[k8s][requeue]") {
  test::FakeApiServer api;
  ApiClient client(api.client_config());
  std::vector<json> pods = {waiting_pod("a"), waiting_pod("b"), waiting_pod("gone")};
  api.add_pod(pods[0]);
  api.add_pod(pods[1]);  // "gone" was deleted before the informer said so: 404
  api.fail_next("PATCH", "/api/v1/namespaces/ml/pods/a", 1, 500);
  api.fail_next("GET", "/apis/coordination.k8s.io/", 1, 403, "forbidden");
  std::vector<std::string> logs;
  PodRequeue requeue(client, leader_options(), [&](const std::string& m) { logs.push_back(m); });
  requeue.on_list(pods);

  // The lease cannot be read: requeue as if leading (a needless retry beats a 5-minute wait).
  CHECK(requeue.step(true, Clock::now()) == 3);
  CHECK(requeue.patched_total() == 1);
  CHECK(requeue.failed_total() == 2);
  CHECK_FALSE(annotation(api, "b").empty());
  CHECK(annotation(api, "a").empty());
  std::string all;
  for (const auto& l : logs) all += l + "\n";
  CHECK_THAT(all, Catch::Contains("cannot read lease gapless-system/gapless-scheduler"));
  CHECK_THAT(all, Catch::Contains("pod ml/a not patched"));
  CHECK_THAT(all, Catch::Contains("pod ml/gone not patched"));
}

TEST_CASE("requeue: fed by the pod informer, it follows the API server", "[k8s][requeue]") {
  test::FakeApiServer api;
  ApiClient client(api.client_config());
  api.add_pod(waiting_pod("listed"));
  RequeueOptions o;
  PodRequeue requeue(client, o);
  InformerOptions io;
  io.path = "/api/v1/pods";
  Informer informer(client, io, requeue.feed({}));
  std::thread thread([&] { informer.run(); });
  CHECK(test::eventually([&] { return informer.synced(); }));
  CHECK(requeue.parked() == std::vector<std::string>{"ml/listed"});
  api.add_pod(waiting_pod("watched"));
  CHECK(test::eventually([&] { return requeue.parked().size() == 2; }));
  CHECK(requeue.step(true, Clock::now()) == 2);
  // The annotation is no reason to track a pod: the patched pods stay parked until
  // kube-scheduler writes its next attempt's condition.
  CHECK(test::eventually([&] { return !annotation(api, "watched").empty(); }));
  api.update_pod("ml", "listed",
                 [](json& p) { p["status"]["conditions"][0]["reason"] = "Unschedulable"; });
  CHECK(test::eventually([&] { return requeue.parked().size() == 1; }));
  informer.stop();
  api.close_watches();
  thread.join();
}

}  // namespace
}  // namespace gapless::k8s
