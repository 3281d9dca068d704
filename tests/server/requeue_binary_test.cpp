// gapless-extender in Kubernetes mode requeues, once ready, the pods kube-scheduler parked after
// an extender error (docs/high-availability.md): the binary's flags and wiring, against the fake
// API server. PodRequeue's rules are tested in tests/k8s/pod_requeue_test.cpp.
#include <signal.h>
#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <string>

#include "child_process.h"
#include "eventually.h"
#include "fake_api_server.h"
#include "kubeconfig.h"
#include "temp_dir.h"
#include "test_paths.h"

namespace {

using nlohmann::json;

json parked_pod(const std::string& name, const std::string& reason) {
  return json{
      {"metadata", {{"name", name}, {"namespace", "ml"}}},
      {"spec", {{"schedulerName", "gapless-scheduler"}, {"containers", json::array()}}},
      {"status",
       {{"phase", "Pending"},
        {"conditions", {{{"type", "PodScheduled"}, {"status", "False"}, {"reason", reason}}}}}}};
}

std::string requeue_mark(const gapless::test::FakeApiServer& api, const std::string& name) {
  const auto pod = api.pod("ml", name);
  if (!pod) return "";
  return (*pod)["metadata"].value("annotations", json::object()).value("gapless.io/requeue", "");
}

}  // namespace

TEST_CASE("gapless-extender annotates its parked pods when its kube-scheduler leads",
          "[server][requeue]") {
  const std::string bin = gapless::test::binary_dir() + "/gapless-extender";
  if (!std::filesystem::exists(bin)) {
    WARN("SKIPPED: " << bin << " is not built");
    return;
  }
  gapless::test::FakeApiServer api("t0ken");
  api.add_pod(parked_pod("errored", "SchedulerError"));
  api.add_pod(parked_pod("unschedulable", "Unschedulable"));
  const bool leads = GENERATE(true, false);
  api.set_lease("gapless-system", "gapless-scheduler", leads ? "sched-a_5c1d" : "sched-b_9e0f");
  gapless::test::TempDir dir;
  const std::string kubeconfig = gapless::test::write_token_kubeconfig(dir, api.url(), "t0ken");
  gapless::test::SpawnOptions spawn_options;
  spawn_options.stderr_path = dir.file("stderr");
  const pid_t pid = gapless::test::spawn(
      {bin, "--kubeconfig=" + kubeconfig, "--listen=127.0.0.1:0", "--replica-name=sched-a",
       "--scheduler-lease=gapless-system/gapless-scheduler"},
      spawn_options);

  // Ready (every list applied) and then one lease read: the leader annotates, a standby not.
  const bool asked = gapless::test::eventually(
      [&] { return api.count_requests("GET", "/apis/coordination.k8s.io/") > 0; });
  if (leads)
    CHECK(gapless::test::eventually([&] { return !requeue_mark(api, "errored").empty(); }));
  kill(pid, SIGTERM);
  waitpid(pid, nullptr, 0);
  INFO(dir.read("stderr"));
  CHECK(asked);
  CHECK(requeue_mark(api, "errored").empty() == !leads);
  CHECK(requeue_mark(api, "unschedulable").empty());
  CHECK(api.count_requests("PATCH", "/api/v1/namespaces/ml/pods/") == (leads ? 1u : 0u));
}
