// kubectl gapless: its views (gapless::cli) over a demo extender's /debug/state and /debug/explain,
// its kubectl port-forward (with a fake kubectl), and the binary with --extender and through the
// port-forward, the pod for explain read from a fake API server.
#include <cstdio>

#include "fake_api_server.h"
#include "fake_kubectl.h"
#include "gapless/cli/port_forward.h"
#include "gapless/cli/views.h"
#include "kubeconfig.h"
#include "run_command.h"
#include "temp_dir.h"
#include "test_paths.h"
#include "test_server.h"

namespace gapless::test {

TEST_CASE("kubectl gapless nodes: the GPU map shows islands, holders and fences") {
  TestServer srv(demo_cluster());
  REQUIRE(srv.filter_and_bind(gpu_pod("two", "uid-cli-1", 2), "h100-nvs-01") == "");
  srv.extender().mutate([](model::Cluster& c) { c.fence("t4-02", "test fence"); });
  const json state = json::parse(srv.get("/debug/state").body);

  auto all = cli::render_nodes(state, "");
  REQUIRE(all);
  INFO(*all);
  CHECK_THAT(*all, Catch::Contains("h100-nvs-01  NVIDIA-H100-80GB-HBM3  8 GPU(s)  NVLink islands: "
                                   "[0,1,2,3,4,5,6,7]"));
  CHECK_THAT(*all, Catch::Contains("  GPU 0  healthy  default/two (whole)"));
  CHECK_THAT(*all, Catch::Contains("  GPU 2  healthy  free"));
  CHECK_THAT(
      *all, Catch::Contains("t4-02  Tesla-T4  4 GPU(s)  NVLink islands: none  FENCED: test fence"));

  auto one = cli::render_nodes(state, "t4-01");
  REQUIRE(one);
  CHECK(one->rfind("t4-01  ", 0) == 0);
  CHECK(one->find("h100") == std::string::npos);
  CHECK_FALSE(cli::render_nodes(state, "nowhere"));
}

TEST_CASE("kubectl gapless explain: the request covers every node, the view every verdict") {
  TestServer srv(demo_cluster());
  const json state = json::parse(srv.get("/debug/state").body);
  const json pod = gpu_pod("train", "uid-cli-2", 2);
  CHECK_FALSE(cli::explain_request(pod, "ml/other", state));
  auto body = cli::explain_request(pod, "default/train", state);
  REQUIRE(body);
  auto view = cli::render_explanation(srv.call("/debug/explain", *body));
  REQUIRE(view);
  INFO(*view);
  CHECK(view->rfind("pod default/train, profile default\n", 0) == 0);
  CHECK_THAT(*view, Catch::Contains("  passed  score 10/10  raw "));
  CHECK_THAT(*view, Catch::Contains("  would get: GPU "));
  CHECK_THAT(*view, Catch::Contains("a100-mig-01  unresolvable: gapless: node has fewer than 2"));
  CHECK_FALSE(cli::render_explanation(srv.call("/debug/explain", "{}")));
}

}  // namespace gapless::test

namespace gapless::test {

TEST_CASE("kubectl gapless: the pod's path on the API server") {
  auto p = cli::pod_path("ml/train-0");
  REQUIRE(p);
  CHECK(*p == "/api/v1/namespaces/ml/pods/train-0");
  for (const char* bad : {"train-0", "/x", "ml/", "ml/a/b", "ml/a?b"}) {
    INFO(bad);
    CHECK_FALSE(cli::pod_path(bad));
  }
}

TEST_CASE("kubectl gapless port-forward: kubectl's arguments and its forwarding line") {
  cli::PortForwardSpec spec;
  CHECK(cli::port_forward_args(spec) ==
        std::vector<std::string>{"port-forward", "-n", "gapless-system", "--address", "127.0.0.1",
                                 "deploy/gapless-scheduler", ":8888"});
  spec.kubeconfig = "/k";
  spec.context = "prod";
  spec.local_port = 8899;
  CHECK(cli::port_forward_args(spec) ==
        std::vector<std::string>{"--kubeconfig", "/k", "--context", "prod", "port-forward", "-n",
                                 "gapless-system", "--address", "127.0.0.1",
                                 "deploy/gapless-scheduler", "8899:8888"});

  CHECK(cli::forwarded_address("Forwarding from 127.0.0.1:41234 -> 8888", 8888) ==
        "127.0.0.1:41234");
  CHECK(cli::forwarded_address("Forwarding from [::1]:41234 -> 8888\r", 8888) == "[::1]:41234");
  for (const char* other :
       {"Forwarding from 127.0.0.1:41234 -> 9400", "Handling connection for 41234",
        "Forwarding from 127.0.0.1: -> 8888", "Forwarding from 127.0.0.1:x -> 8888",
        "Forwarding from  -> 8888", "Forwarding from 127.0.0.1:1/x -> 8888", ""}) {
    INFO(other);
    CHECK_FALSE(cli::forwarded_address(other, 8888));
  }
}

TEST_CASE("kubectl gapless port-forward: kubectl runs while its owner lives, not after") {
  TempDir dir;
  FakeKubectl kubectl(dir, FakeKubectl::forwarding_to(40999));
  cli::PortForwardSpec spec;
  spec.kubectl = kubectl.path();
  auto forward = cli::PortForward::start(spec);
  REQUIRE(forward);
  CHECK((*forward)->url() == "http://127.0.0.1:40999");
  CHECK((*forward)->pid() == kubectl.pid());
  CHECK(kubectl.running());
  CHECK_FALSE((*forward)->ended());
  forward->reset();
  CHECK_FALSE(kubectl.running());
}

TEST_CASE("kubectl gapless port-forward: a silent kubectl is ended at the timeout") {
  TempDir dir;
  FakeKubectl kubectl(dir, "echo 'waiting for the pod' >&2\nexec sleep 600");
  cli::PortForwardSpec spec;
  spec.kubectl = kubectl.path();
  spec.ready_timeout = std::chrono::milliseconds(500);
  auto forward = cli::PortForward::start(spec);
  REQUIRE_FALSE(forward);
  CHECK_THAT(forward.error(),
             Catch::Contains("printed no \"Forwarding from\" line in 500 ms: waiting for the pod"));
  CHECK_FALSE(kubectl.running());
}

}  // namespace gapless::test

namespace gapless::test {

TEST_CASE("kubectl-gapless without --extender: kubectl port-forward; the pod from the API server") {
  TestServer srv(demo_cluster());
  REQUIRE(srv.filter_and_bind(gpu_pod("two", "uid-cli-3", 2), "h100-nvs-01") == "");
  FakeApiServer api("secret-token");
  const std::string extender = "http://127.0.0.1:" + std::to_string(srv.port());
  api.add_pod(gpu_pod("train", "uid-cli-4", 2));
  TempDir dir;
  const std::string kubeconfig = write_token_kubeconfig(dir, api.url(), "secret-token");
  FakeKubectl kubectl(dir, FakeKubectl::forwarding_to(srv.port()));
  const std::string cli = gapless::test::binary_dir() + "/kubectl-gapless ";
  const std::string err = " 2>" + dir.file("stderr");

  const Exit direct = run_command(cli + "nodes h100-nvs-01 --extender " + extender + err);
  const Exit forwarded = run_command(kubectl.env() + cli + "nodes h100-nvs-01 --kubeconfig " +
                                     kubeconfig + " --context x" + err);
  CHECK(forwarded.status == 0);
  CHECK(forwarded.out == direct.out);
  CHECK_THAT(forwarded.out, Catch::Contains("  GPU 0  healthy  default/two (whole)"));
  CHECK(kubectl.args() == std::vector<std::string>{"--kubeconfig", kubeconfig, "--context", "x",
                                                   "port-forward", "-n", "gapless-system",
                                                   "--address", "127.0.0.1",
                                                   "deploy/gapless-scheduler", ":8888"});
  CHECK_FALSE(kubectl.running());
  CHECK(api.requests().empty());  // nodes needs nothing from the API server itself

  // explain reads the pod from the API server (as kubectl would), then asks the extender.
  const Exit explained =
      run_command(kubectl.env() + cli + "explain default/train --kubeconfig " + kubeconfig + err);
  INFO(explained.out);
  CHECK(explained.status == 0);
  CHECK(explained.out.rfind("pod default/train, profile default\n", 0) == 0);
  CHECK_THAT(explained.out, Catch::Contains("  would get: GPU "));
  CHECK(api.count_requests("GET", "/api/v1/namespaces/default/pods/train") == 1);
  CHECK(kubectl.args().at(1) == kubeconfig);
  CHECK_FALSE(kubectl.running());

  // A pod the API server does not have: its 404, exit 1, and no port-forward started.
  std::remove(dir.file("kubectl.args").c_str());
  const Exit missing =
      run_command(kubectl.env() + cli + "explain default/nope --kubeconfig " + kubeconfig + err);
  CHECK(missing.status == 1);
  CHECK(kubectl.args().empty());
}

TEST_CASE("kubectl-gapless: a kubectl that fails, or none, is a clear error and no hang") {
  TempDir dir;
  FakeKubectl kubectl(dir,
                      "echo 'error: pods \"gapless-scheduler-0\" is forbidden: User \"bob\" "
                      "cannot create resource \"pods/portforward\"' >&2\nexit 1");
  const std::string cli = gapless::test::binary_dir() + "/kubectl-gapless ";
  const std::string err = " 2>" + dir.file("stderr");
  auto said = [&dir] {
    std::ifstream in(dir.file("stderr"));
    return std::string(std::istreambuf_iterator<char>(in), {});
  };

  const Exit refused = run_command(kubectl.env() + cli + "nodes" + err);
  CHECK(refused.status == 1);
  CHECK(refused.out.empty());
  INFO(said());
  CHECK_THAT(said(), Catch::Contains("port-forward -n gapless-system --address 127.0.0.1 "
                                     "deploy/gapless-scheduler :8888` ended (exit status 1): "
                                     "error: pods \"gapless-scheduler-0\" is forbidden"));
  CHECK_THAT(said(), Catch::Contains("`create` on pods/portforward in gapless-system"));

  const Exit none = run_command("KUBECTL=" + dir.file("no-kubectl") + " " + cli + "nodes" + err);
  CHECK(none.status == 1);
  CHECK_THAT(said(), Catch::Contains("cannot find \"" + dir.file("no-kubectl") + "\""));
}

}  // namespace gapless::test
