// What one bind costs the API server, as gapless-extender runs in Kubernetes mode (docs/policies.md
// "Sampling"): the Binding and the node's claim; no read of the pod the pod informer holds
// (KubeBinder::admit), and a Normal GaplessBound Event only with --bound-events.
#include <signal.h>
#include <sys/wait.h>

#include <httplib.h>
#include <catch2/catch.hpp>
#include <filesystem>
#include <string>
#include <vector>

#include "../k8s/k8s_objects.h"
#include "child_process.h"
#include "eventually.h"
#include "fake_api_server.h"
#include "kubeconfig.h"
#include "temp_dir.h"
#include "test_paths.h"
#include "unused_port.h"

using nlohmann::json;

namespace {

std::size_t events_named(const gapless::test::FakeApiServer& api, const std::string& reason) {
  std::size_t n = 0;
  for (const json& e : api.events()) n += e.value("reason", "") == reason;
  return n;
}

}  // namespace

TEST_CASE("gapless-extender binds a pod its informer holds with the Binding and a claim only",
          "[server][bind_trust]") {
  const std::string bin = gapless::test::binary_dir() + "/gapless-extender";
  if (!std::filesystem::exists(bin)) {
    WARN("SKIPPED: " << bin << " is not built");
    return;
  }
  gapless::test::FakeApiServer api("t0ken");
  api.add_node(gapless::k8s::testing::topology_node("n1", 8));
  const json pod = gapless::k8s::testing::pod_object("train", "uid-t", "");
  api.add_pod(pod);
  const bool bound_events = GENERATE(false, true);
  gapless::test::TempDir dir;
  const std::string kubeconfig = gapless::test::write_token_kubeconfig(dir, api.url(), "t0ken");
  const int port = gapless::test::unused_port();
  std::vector<std::string> args = {bin, "--kubeconfig=" + kubeconfig,
                                   "--listen=127.0.0.1:" + std::to_string(port),
                                   "--replica-name=sched-a", "--claims-namespace=gapless-system"};
  if (bound_events) args.push_back("--bound-events");
  gapless::test::SpawnOptions spawn_options;
  spawn_options.stderr_path = dir.file("stderr");
  const pid_t pid = gapless::test::spawn(args, spawn_options);

  httplib::Client client("127.0.0.1", port);
  const bool ready = gapless::test::eventually([&] {
    auto r = client.Get("/readyz");
    return r && r->status == 200;
  });
  std::string filtered, bound;
  std::size_t pod_reads = 0;
  if (ready) {
    api.clear_log();
    const json filter = {{"Pod", pod}, {"Nodes", nullptr}, {"NodeNames", {"n1"}}};
    auto f = client.Post("/filter", filter.dump(), "application/json");
    filtered = f ? f->body : "no answer";
    const json bind = {
        {"PodName", "train"}, {"PodNamespace", "ml"}, {"PodUID", "uid-t"}, {"Node", "n1"}};
    auto b = client.Post("/bind", bind.dump(), "application/json");
    bound = b ? b->body : "no answer";
    pod_reads = api.count_requests("GET", "/api/v1/namespaces/ml/pods/train");
  }
  kill(pid, SIGTERM);
  waitpid(pid, nullptr, 0);
  INFO(dir.read("stderr"));
  REQUIRE(ready);
  CHECK(json::parse(filtered).value("NodeNames", json()) == json::array({"n1"}));
  CHECK(json::parse(bound) == json{{"Error", ""}});
  CHECK(api.pod("ml", "train")->at("spec").at("nodeName") == "n1");
  CHECK(pod_reads == 0);  // the pod informer's copy was checked
  CHECK(api.count_requests("POST", "/api/v1/namespaces/ml/pods/train/binding") == 1);
  CHECK(api.count_requests("POST", "/api/v1/namespaces/gapless-system/configmaps") == 1);
  CHECK(events_named(api, "GaplessBound") == (bound_events ? 1u : 0u));
}
