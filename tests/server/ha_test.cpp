// Several replicas (docs/high-availability.md): two extenders, each with its own informers and
// model, bind through ONE fake API server. Racing binds for the same GPUs, in both orders that
// happen in production (split-brain: two leaders bind at once; leader change: the old leader's
// Binding lands late), must never leave a GPU booked by two pods; a standby serves at once,
// with the same model, when the leader goes.
//
// GAPLESS_HA_ROUNDS sets the rounds per order of the race test (default 300, 50 under
// sanitizers: 600 rounds take 7 to 11 s in a RelWithDebInfo build on a loaded 2-core machine).
// GAPLESS_HA_NO_CLAIMS=1 runs the race test without claims, to see what it catches (it fails).
#if __has_include("fake_api_server.h")
#include <catch2/catch.hpp>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <thread>

#include "../k8s/k8s_objects.h"
#include "eventually.h"
#include "fake_api_server.h"
#include "kube_extender.h"

using namespace gapless;
using namespace std::chrono_literals;
using nlohmann::json;

namespace {

constexpr int kGpus = 8;

json gpu_pod(const std::string& name, int gpus) {
  json p = k8s::testing::pod_object(name, "uid-" + name, "");
  p["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = std::to_string(gpus);
  return p;
}

// kube-scheduler's filter, then bind, for one pod on node n1; the bind's Error ("" when bound).
std::string schedule(test::KubeExtender& x, const json& pod) {
  const std::string name = pod["metadata"]["name"];
  const json f = json::parse(
      x.extender().filter(json{{"Pod", pod}, {"Nodes", nullptr}, {"NodeNames", {"n1"}}}.dump()));
  if (f.at("Error") != "") return f.at("Error");
  if (f.at("NodeNames").empty()) return "filtered out";
  const json b = json::parse(x.extender().bind(
      json{{"PodName", name}, {"PodNamespace", "ml"}, {"PodUID", "uid-" + name}, {"Node", "n1"}}
          .dump()));
  return b.at("Error");
}

// From the pods' records on the API server: how many pods hold each GPU of n1, and how many
// pods are bound.
struct Booking {
  std::map<int, int> holders;
  int bound = 0;
  int double_booked() const {
    int n = 0;
    for (const auto& [gpu, pods] : holders) n += pods > 1;
    return n;
  }
};

Booking booking(const test::FakeApiServer& server, const std::vector<json>& pods) {
  Booking b;
  for (const json& p : pods) {
    auto now = server.pod("ml", p["metadata"]["name"]);
    if (!now || !now->at("spec").contains("nodeName")) continue;
    ++b.bound;
    const json record = json::parse(
        now->at("metadata").at("annotations").at("gapless.io/allocation").get<std::string>());
    for (const json& g : record.at("gpus")) ++b.holders[g.at("index").get<int>()];
  }
  return b;
}

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
constexpr int kDefaultRounds = 50;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
constexpr int kDefaultRounds = 50;
#else
constexpr int kDefaultRounds = 300;
#endif
#else
constexpr int kDefaultRounds = 300;
#endif

int rounds_per_order() {
  const char* v = std::getenv("GAPLESS_HA_ROUNDS");
  return v != nullptr && std::atoi(v) > 0 ? std::atoi(v) : kDefaultRounds;
}

// The old leader `a` binds pods[0] but its Binding is held at the API server until `b` has
// scheduled the others: what a leader change looks like to the API server.
std::vector<std::string> leader_change(test::FakeApiServer& server, test::KubeExtender& a,
                                       test::KubeExtender& b, const std::vector<json>& pods) {
  const std::string first = pods[0]["metadata"]["name"];
  server.hold_next("POST", "/api/v1/namespaces/ml/pods/" + first + "/binding", 1);
  std::atomic<bool> a_done{false};
  std::string a_error;
  std::thread old_leader([&] {
    a_error = schedule(a, pods[0]);
    a_done = true;
  });
  REQUIRE(test::eventually([&] { return server.held_requests() == 1 || a_done; }, 20s));
  std::vector<std::string> errors{""};
  for (std::size_t i = 1; i < pods.size(); ++i) errors.push_back(schedule(b, pods[i]));
  server.release_held();
  old_leader.join();
  errors[0] = a_error;
  return errors;
}

// Both replicas bind at once, each its half of `pods`.
std::vector<std::string> split_brain(test::KubeExtender& a, test::KubeExtender& b,
                                     const std::vector<json>& pods) {
  std::vector<std::string> errors(pods.size());
  std::thread left([&] {
    for (std::size_t i = 0; i < pods.size(); i += 2) errors[i] = schedule(a, pods[i]);
  });
  for (std::size_t i = 1; i < pods.size(); i += 2) errors[i] = schedule(b, pods[i]);
  left.join();
  return errors;
}

}  // namespace

TEST_CASE("without claims, an old leader's late Binding double-books GPUs (why claims exist)",
          "[server][ha]") {
  test::FakeApiServer server;
  server.load({k8s::testing::topology_node("n1", kGpus)}, {});
  test::KubeExtender a(server), b(server);  // no replica names: no claims
  REQUIRE(a.wait([&] { return a.extender().ready() && b.extender().ready(); }));
  // Whole-node pods: whatever the scores, both replicas choose the same eight GPUs.
  const std::vector<json> pods = {gpu_pod("old-0", kGpus), gpu_pod("new-0", kGpus)};
  for (const json& p : pods) server.add_pod(p);

  server.hold_next("POST", "/api/v1/namespaces/ml/pods/old-0/binding", 1);
  std::string a_error = "not run";
  std::thread old_leader([&] { a_error = schedule(a, pods[0]); });
  REQUIRE(test::eventually([&] { return server.held_requests() == 1; }, 20s));
  CHECK(schedule(b, pods[1]) == "");  // b's model does not know what a reserved
  // The record on the watch wins over a's reservation of the same GPUs: dropped and counted.
  CHECK(test::eventually([&] { return a.sync().reservations_dropped() == 1; }, 20s));
  // The counter moves under the model's lock, the metric when the drop is handed on after it.
  CHECK(test::eventually(
      [&] {
        return a.extender().metrics_text().find("gapless_reservation_conflicts_total 1") !=
               std::string::npos;
      },
      20s));
  server.release_held();
  old_leader.join();
  CHECK(a_error == "");  // the API server knows nothing of GPUs: the Binding lands
  CHECK(booking(server, pods).double_booked() == kGpus);
  // The informers see two records for the same GPUs and fence the node.
  CHECK(test::eventually([&] { return b.sync().bad_records() >= 1; }, 20s));
}

TEST_CASE("with claims, the new leader cannot take GPUs the old leader's late Binding holds",
          "[server][ha]") {
  test::FakeApiServer server;
  server.load({k8s::testing::topology_node("n1", kGpus)}, {});
  test::KubeExtender a(server, "replica-a"), b(server, "replica-b");
  REQUIRE(a.wait([&] { return a.extender().ready() && b.extender().ready(); }));
  const std::vector<json> pods = {gpu_pod("old-0", 4), gpu_pod("new-0", 4), gpu_pod("new-1", 4)};
  for (const json& p : pods) server.add_pod(p);

  const auto errors = leader_change(server, a, b, pods);
  CHECK(errors[0] == "");
  // b chose a's GPUs first (its model did not know them), saw a's claim, and chose again.
  CHECK(errors[1] == "");
  // Nothing is left beside a's claim: refused, and kube-scheduler retries the pod later.
  CHECK_THAT(errors[2], Catch::Contains("nothing fits beside other replicas' claims"));
  const Booking after = booking(server, pods);
  CHECK(after.double_booked() == 0);
  CHECK(after.bound == 2);
  CHECK(a.sync().reservations_dropped() == 0);
  CHECK_THAT(b.extender().metrics_text(),
             Catch::Contains("gapless_binds_total{outcome=\"conflict\"} 1"));
  // Both models converge on what the API server has.
  CHECK(test::eventually([&] { return a.allocations() == 2 && b.allocations() == 2; }, 20s));
  CHECK(a.sync().bad_records() == 0);
  CHECK(b.sync().bad_records() == 0);
}

TEST_CASE("two replicas race binds for the same GPUs, round after round: no GPU double-booked",
          "[server][ha]") {
  test::FakeApiServer server;
  server.load({k8s::testing::topology_node("n1", kGpus)}, {});
  const bool claims = std::getenv("GAPLESS_HA_NO_CLAIMS") == nullptr;
  // Claims in one shared object (as shipped), and in one object per node.
  const std::size_t objects = GENERATE(1, 0);
  INFO("claim objects: " << objects);
  test::KubeExtender a(server, claims ? "replica-a" : "", std::nullopt, objects),
      b(server, claims ? "replica-b" : "", std::nullopt, objects);
  REQUIRE(a.wait([&] { return a.extender().ready() && b.extender().ready(); }));
  const int rounds = rounds_per_order();
  int bound = 0, refused = 0, double_booked = 0;
  const auto start = std::chrono::steady_clock::now();
  for (int r = 0; r < 2 * rounds; ++r) {
    const bool late_leader = r % 2 == 0;
    std::vector<json> pods;
    for (int i = 0; i < 4; ++i) {
      pods.push_back(gpu_pod("r" + std::to_string(r) + "-" + std::to_string(i), 1 + (r + i) % 4));
      server.add_pod(pods.back());
    }
    const auto errors = late_leader ? leader_change(server, a, b, pods) : split_brain(a, b, pods);
    const Booking now = booking(server, pods);
    INFO("round " << r << (late_leader ? " (leader change)" : " (split brain)"));
    if (claims) REQUIRE(now.double_booked() == 0);
    for (const auto& e : errors) (e.empty() ? bound : refused) += 1;
    double_booked += now.double_booked();
    // Both models hold exactly what the API server has, then free it when the pods go.
    if (claims) {
      REQUIRE(test::eventually(
          [&] {
            return a.allocations() == std::size_t(now.bound) &&
                   b.allocations() == std::size_t(now.bound);
          },
          20s));
    }
    for (const json& p : pods) server.delete_pod("ml", p["metadata"]["name"]);
    REQUIRE(test::eventually([&] { return a.allocations() == 0 && b.allocations() == 0; }, 20s));
  }
  const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
  std::printf(
      "ha race%s (claim objects %zu): %d rounds (%d leader change, %d split brain), %d binds, "
      "%d refused, %d GPUs double-booked, %.1f s\n",
      claims ? "" : " without claims", objects, 2 * rounds, rounds, rounds, bound, refused,
      double_booked, took.count());
  CHECK(double_booked == 0);
  CHECK(bound > 0);
  CHECK(refused > 0);  // the races were real: some binds lost to the other replica
  CHECK(a.sync().bad_records() == 0);
  CHECK(b.sync().bad_records() == 0);
}

TEST_CASE("failover: the standby serves at once, with the leader's model", "[server][ha]") {
  test::FakeApiServer server;
  server.load({k8s::testing::topology_node("n1", kGpus)}, {});
  auto leader = std::make_unique<test::KubeExtender>(server, "replica-a");
  test::KubeExtender standby(server, "replica-b");
  REQUIRE(leader->wait([&] { return leader->extender().ready() && standby.extender().ready(); }));
  for (int i = 0; i < 3; ++i) {
    const json p = gpu_pod("p" + std::to_string(i), 1 + i);
    server.add_pod(p);
    REQUIRE(schedule(*leader, p) == "");
  }
  // The standby's model follows the leader's binds through its own informers.
  REQUIRE(test::eventually(
      [&] { return standby.extender().debug_state() == leader->extender().debug_state(); }, 20s));
  const std::string state = leader->extender().debug_state();

  leader.reset();
  const auto gone = std::chrono::steady_clock::now();
  CHECK(standby.extender().ready());  // no rebuild: it was ready all along
  CHECK(standby.extender().debug_state() == state);
  const json next = gpu_pod("after-failover", 2);
  server.add_pod(next);
  CHECK(schedule(standby, next) == "");
  const std::chrono::duration<double, std::milli> took = std::chrono::steady_clock::now() - gone;
  std::printf("failover: the standby bound a pod %.1f ms after the leader stopped\n", took.count());
  CHECK(booking(server, {next}).bound == 1);
}
TEST_CASE("a claim that cannot be written fails the bind; a failed Binding takes its claim back",
          "[server][ha]") {
  test::FakeApiServer server;
  server.load({k8s::testing::topology_node("n1", kGpus)}, {});
  test::KubeExtender a(server, "replica-a");
  REQUIRE(a.wait([&] { return a.extender().ready(); }));
  const json pod = gpu_pod("p", 2);
  server.add_pod(pod);
  const std::string claims_path = "/api/v1/namespaces/gapless-system/configmaps";

  SECTION("the API server refuses the claim: nothing is bound, nothing reserved") {
    server.fail_next("GET", claims_path, 1, 500, "etcd unavailable");
    CHECK_THAT(schedule(a, pod), Catch::Contains("etcd unavailable"));
    CHECK(server.bindings().empty());
    CHECK(a.allocations() == 0);
    CHECK_THAT(a.extender().metrics_text(),
               Catch::Contains("gapless_binds_total{outcome=\"error\"} 1"));
    CHECK(schedule(a, pod) == "");  // kube-scheduler's retry goes through
  }
  SECTION("the Binding fails after the claim: the claim is removed again") {
    server.fail_next("POST", "/api/v1/namespaces/ml/pods/p/binding", 1, 500, "injected");
    CHECK_THAT(schedule(a, pod), Catch::Contains("injected"));
    CHECK(a.allocations() == 0);
    auto cm = server.config_map("gapless-system", k8s::claims_object_name("n1", 1));
    REQUIRE(cm);
    CHECK(cm->at("data").at("claims") == "[]");
  }
}

#endif
