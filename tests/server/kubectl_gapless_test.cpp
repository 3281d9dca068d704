// kubectl gapless: its views (gapless::cli) over a demo extender's /debug/state and /debug/explain,
// and the binary through a kubeconfig and a fake API server's service proxy.
#include "fake_api_server.h"
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

TEST_CASE("kubectl gapless: paths through the API server") {
  CHECK(cli::proxy_path("/debug/state") ==
        "/api/v1/namespaces/gapless-system/services/gapless-extender-metrics:http-metrics/proxy"
        "/debug/state");
  auto p = cli::pod_path("ml/train-0");
  REQUIRE(p);
  CHECK(*p == "/api/v1/namespaces/ml/pods/train-0");
  for (const char* bad : {"train-0", "/x", "ml/", "ml/a/b", "ml/a?b"}) {
    INFO(bad);
    CHECK_FALSE(cli::pod_path(bad));
  }
}

}  // namespace gapless::test

namespace gapless::test {

TEST_CASE("kubectl-gapless through a kubeconfig: the API server's service proxy and pod read") {
  TestServer srv(demo_cluster());
  REQUIRE(srv.filter_and_bind(gpu_pod("two", "uid-cli-3", 2), "h100-nvs-01") == "");
  FakeApiServer api("secret-token");
  const std::string extender = "http://127.0.0.1:" + std::to_string(srv.port());
  api.add_pod(gpu_pod("train", "uid-cli-4", 2));
  TempDir dir;
  const std::string kubeconfig = write_token_kubeconfig(dir, api.url(), "secret-token");
  const std::string cli = gapless::test::binary_dir() + "/kubectl-gapless ";
  const std::string err = " 2>" + dir.file("stderr");

  // No endpoints behind the Service yet: a clear error, exit 1.
  const Exit down = run_command(cli + "nodes --kubeconfig " + kubeconfig + err);
  CHECK(down.status == 1);

  api.proxy_service("gapless-system", "gapless-extender-metrics:http-metrics", extender);
  const Exit direct = run_command(cli + "nodes h100-nvs-01 --extender " + extender + err);
  const Exit proxied = run_command(cli + "nodes h100-nvs-01 --kubeconfig " + kubeconfig + err);
  CHECK(proxied.status == 0);
  CHECK(proxied.out == direct.out);
  CHECK_THAT(proxied.out, Catch::Contains("  GPU 0  healthy  default/two (whole)"));
  CHECK(api.count_requests("GET", "/api/v1/namespaces/gapless-system/services/") == 2);

  // explain reads the pod from the API server (as kubectl would), then asks the extender.
  const Exit explained =
      run_command(cli + "explain default/train --kubeconfig " + kubeconfig + err);
  INFO(explained.out);
  CHECK(explained.status == 0);
  CHECK(explained.out.rfind("pod default/train, profile default\n", 0) == 0);
  CHECK_THAT(explained.out, Catch::Contains("  would get: GPU "));
  CHECK(api.count_requests("GET", "/api/v1/namespaces/default/pods/train") == 1);

  // A pod the API server does not have: its 404, exit 1.
  const Exit missing = run_command(cli + "explain default/nope --kubeconfig " + kubeconfig + err);
  CHECK(missing.status == 1);
}

}  // namespace gapless::test
