// The GPU map's routes (docs/gpu-map.md): GET /ui, /ui/<file>, /ui/map.json and
// /ui/explain/<uid> on the demo cluster, and `kubectl gapless ui` with --extender and through
// kubectl port-forward (a fake kubectl). The page itself runs in a real browser in tests/ui/.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "child_process.h"
#include "fake_kubectl.h"
#include "temp_dir.h"
#include "test_paths.h"
#include "test_server.h"

namespace gapless::test {

namespace {

// The map's pod table as names, for reading holders.
std::vector<std::string> pod_names(const json& map) {
  std::vector<std::string> out;
  for (const json& p : map.at("pods")) out.push_back(p.at("name"));
  return out;
}

const json& node_of(const json& map, const std::string& name) {
  for (const json& n : map.at("nodes")) {
    if (n.at("name") == name) return n;
  }
  FAIL("no node " << name);
  throw std::logic_error("unreachable");
}

}  // namespace

TEST_CASE("GPU map: holders by GPU, shares, MIG slices, islands, counts and waiting pods") {
  TestServer srv(demo_cluster());
  REQUIRE(srv.filter_and_bind(gpu_pod("two", "uid-map-1", 2), "h100-nvs-01") == "");
  REQUIRE(srv.filter_and_bind(
              pod("infer", "uid-map-2",
                  {{"gapless.io/gpu-memory", "20480"}, {"gapless.io/gpu-compute", "300"}}),
              "a100-02") == "");
  REQUIRE(srv.filter_and_bind(pod("nb", "uid-map-3", {{"nvidia.com/mig-3g.40gb", "1"}}),
                              "a100-mig-01") == "");
  srv.extender().mutate([](model::Cluster& c) { c.fence("t4-02", "test fence"); });
  // No node has 16 GPUs: the pod waits.
  const json big = gpu_pod("huge", "uid-map-big", 16);
  std::vector<std::string> names;
  const json state = json::parse(srv.get("/debug/state").body);
  for (const json& n : state.at("nodes")) {
    names.push_back(n.at("name"));
  }
  REQUIRE(srv.call("/filter", extender_args(big, names)).at("NodeNames").empty());

  const httplib::Response res = srv.get("/ui/map.json");
  CHECK(res.status == 200);
  CHECK(res.get_header_value("Cache-Control") == "no-store");
  const json map = json::parse(res.body);
  const std::vector<std::string> pods = pod_names(map);
  CHECK(map.at("nodes").size() == names.size());

  const json& h100 = node_of(map, "h100-nvs-01");
  CHECK(h100.at("model") == "NVIDIA-H100-80GB-HBM3");
  CHECK(h100.at("islands") == json::parse("[[0,1,2,3,4,5,6,7]]"));
  int whole = 0;
  for (const json& g : h100.at("gpus")) {
    if (g.contains("whole")) {
      CHECK(pods.at(g.at("whole").get<std::size_t>()) == "default/two");
      ++whole;
    }
  }
  CHECK(whole == 2);

  int shared = 0, shared_index = -1;
  for (const json& g : node_of(map, "a100-02").at("gpus")) {
    ++shared_index;
    if (!g.contains("shares")) continue;
    ++shared;
    const json& s = g.at("shares").at(0);
    CHECK(pods.at(s.at(0).get<std::size_t>()) == "default/infer");
    CHECK(s.at(1) == 20480);
    CHECK(s.at(2) == 300);
    CHECK(g.at("usedMem") == 20480);
    CHECK_FALSE(g.contains("overuse"));
    break;
  }
  CHECK(shared == 1);

  int mig_held = 0;
  for (const json& g : node_of(map, "a100-mig-01").at("gpus")) {
    for (const json& m : g.value("mig", json::array())) {
      CHECK(m.at("width").get<int>() >= 1);
      if (m.at("pod").is_null()) continue;
      CHECK(m.at("profile") == "3g.40gb");
      CHECK(m.at("width") == 4);
      CHECK(pods.at(m.at("pod").get<std::size_t>()) == "default/nb");
      ++mig_held;
    }
  }
  CHECK(mig_held == 1);
  CHECK(node_of(map, "t4-02").at("fenced") == "test fence");
  CHECK_FALSE(node_of(map, "t4-01").contains("fenced"));

  const json& c = map.at("cluster");
  CHECK(c.at("allocated") == 4);  // two whole, one shared, one with a MIG slice
  CHECK(c.at("allocated").get<int>() + c.at("stranded").get<int>() + c.at("free").get<int>() +
            c.at("unhealthy").get<int>() + c.at("fencedIdle").get<int>() ==
        c.at("gpus").get<int>());
  CHECK(c.at("fencedNodes") == 1);

  // The bound pods are not waiting; the one that fits nowhere is.
  REQUIRE(map.at("pending").size() == 1);
  const json& waiting = map.at("pending").at(0);
  CHECK(waiting.at("pod") == "default/huge");
  CHECK(waiting.at("uid") == "uid-map-big");
  CHECK(waiting.at("kind") == "whole");
  CHECK(waiting.at("ask") == "16 GPUs");

  // The agent marks the share over its vRAM (the pod informer passes the annotation on): the
  // map shows it on that GPU, and again not once the mark is gone. A malformed mark is ignored.
  const auto hooks = srv.extender().sync_hooks();
  hooks.share_overuse("uid-map-2", "[{\"gpu\":" + std::to_string(shared_index) +
                                       ",\"usedMiB\":34816,\"limitMiB\":20480}]");
  hooks.share_overuse("uid-map-1", "{not json");
  json marked = json::parse(srv.get("/ui/map.json").body);
  const json& over = node_of(marked, "a100-02").at("gpus").at(shared_index).at("overuse");
  CHECK(over == json::parse(R"([{"pod":"default/infer","usedMiB":34816,"limitMiB":20480}])"));
  for (const json& g : node_of(marked, "h100-nvs-01").at("gpus"))
    CHECK_FALSE(g.contains("overuse"));
  hooks.share_overuse("uid-map-2", "");
  marked = json::parse(srv.get("/ui/map.json").body);
  CHECK_FALSE(node_of(marked, "a100-02").at("gpus").at(shared_index).contains("overuse"));
}

TEST_CASE("GPU map: explain for a waiting pod, over every node") {
  TestServer srv(demo_cluster());
  const json pod_json = gpu_pod("train", "uid-map-ex", 2);
  REQUIRE(srv.call("/filter", extender_args(pod_json, {"h100-nvs-01"})).at("Error") == "");
  const json x = json::parse(srv.get("/ui/explain/uid-map-ex").body);
  CHECK(x.at("Error") == "");
  CHECK(x.at("Pod") == "default/train");
  const json state = json::parse(srv.get("/debug/state").body);
  CHECK(x.at("Nodes").size() == state.at("nodes").size());  // not only the node filter named

  CHECK_THAT(json::parse(srv.get("/ui/explain/uid-unknown").body).at("Error").get<std::string>(),
             Catch::Contains("no pod with UID"));
  CHECK(srv.get("/ui/explain/a%20b").status == 404);
  CHECK(srv.get("/ui/explain/").status == 404);
}

TEST_CASE("GPU map: the page's files, the redirect and unknown paths") {
  TestServer srv(demo_cluster());
  const httplib::Response root = srv.get("/ui");
  CHECK(root.status == 301);
  CHECK(root.get_header_value("Location") == "ui/");  // relative: works behind a proxy
  const httplib::Response page = srv.get("/ui/");
  CHECK(page.status == 200);
  CHECK(page.get_header_value("Content-Type") == "text/html; charset=utf-8");
  CHECK_THAT(page.body, Catch::Contains("<script src=\"map.js\">"));
  CHECK(page.body.find("src=\"/") == std::string::npos);  // no absolute URL
  const httplib::Response js = srv.get("/ui/map.js");
  CHECK(js.get_header_value("Content-Type") == "text/javascript; charset=utf-8");
  CHECK_THAT(js.body, Catch::Contains("fetch('map.json'"));
  CHECK(srv.get("/ui/map.css").status == 200);
  CHECK(srv.get("/ui/nope.js").status == 404);
  CHECK(srv.get("/uix").status == 404);
}

// Starts `command` with its stdout on a pipe; the first line it prints, and its pid.
struct Child {
  pid_t pid = -1;
  std::string first_line;
};

Child start_reading_first_line(const std::string& command,
                               std::vector<std::string> extra_env = {}) {
  int fds[2];
  REQUIRE(pipe2(fds, O_CLOEXEC) == 0);  // the child gets the write end as its stdout only
  SpawnOptions options;
  options.stdout_fd = fds[1];
  options.extra_env = std::move(extra_env);
  Child c;
  c.pid = spawn({"/bin/sh", "-c", "exec " + command}, options);
  close(fds[1]);
  char ch = 0;
  while (read(fds[0], &ch, 1) == 1 && ch != '\n') c.first_line += ch;
  close(fds[0]);
  return c;
}

int wait_for_exit_status(pid_t pid) {
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST_CASE("kubectl gapless ui: the extender's page, given or through kubectl port-forward") {
  TestServer srv(demo_cluster());
  REQUIRE(srv.filter_and_bind(gpu_pod("two", "uid-map-ui", 2), "h100-nvs-01") == "");
  const std::string extender = "http://127.0.0.1:" + std::to_string(srv.port());
  TempDir dir;
  const std::string kubeconfig = dir.write("kubeconfig", "");  // only passed on to kubectl
  const std::string cli = gapless::test::binary_dir() + "/kubectl-gapless ";

  // With --extender: the URL of the page there.
  Child direct = start_reading_first_line(cli + "ui --extender " + extender + "/");
  CHECK(direct.first_line == extender + "/ui/");
  CHECK(wait_for_exit_status(direct.pid) == 0);

  // Without: the page at the port-forward's local end, kept until SIGTERM. The fake kubectl
  // "forwards" from the demo extender's own port.
  FakeKubectl kubectl(dir, FakeKubectl::forwarding_to(srv.port()));
  Child ui = start_reading_first_line(
      cli + "ui --listen 127.0.0.1:0 --kubeconfig " + kubeconfig + " 2>" + dir.file("stderr"),
      {"KUBECTL=" + kubectl.path()});
  CHECK(ui.first_line == extender + "/ui/");
  CHECK(kubectl.args() == std::vector<std::string>{"--kubeconfig", kubeconfig, "port-forward", "-n",
                                                   "gapless-system", "--address", "127.0.0.1",
                                                   "deploy/gapless-scheduler", ":8888"});
  httplib::Client local(extender);
  auto map = local.Get("/ui/map.json");
  REQUIRE(map);
  CHECK(json::parse(map->body) == json::parse(srv.get("/ui/map.json").body));
  CHECK(kubectl.running());
  kill(ui.pid, SIGTERM);
  CHECK(wait_for_exit_status(ui.pid) == 0);
  CHECK_FALSE(kubectl.running());
}

TEST_CASE("kubectl gapless ui: kubectl port-forward ending ends the ui, with kubectl's words") {
  TempDir dir;
  FakeKubectl kubectl(dir,
                      "echo 'Forwarding from 127.0.0.1:8899 -> 8888'\nsleep 0.2\n"
                      "echo 'error: lost connection to pod' >&2\nexit 1");
  const std::string cli = gapless::test::binary_dir() + "/kubectl-gapless ";
  Child ui =
      start_reading_first_line(cli + "ui 2>" + dir.file("stderr"), {"KUBECTL=" + kubectl.path()});
  CHECK(ui.first_line == "http://127.0.0.1:8899/ui/");
  CHECK(wait_for_exit_status(ui.pid) == 1);
  CHECK(kubectl.args().back() == "8899:8888");  // the default --listen
  std::ifstream in(dir.file("stderr"));
  const std::string said(std::istreambuf_iterator<char>(in), {});
  CHECK_THAT(said, Catch::Contains("error: lost connection to pod\n"
                                   "kubectl-gapless: kubectl port-forward ended (exit status 1)"));
}

}  // namespace gapless::test
