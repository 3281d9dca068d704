// kubectl-gapless: the kubectl plugin that shows what Gapless sees and decides.
//
//   kubectl gapless nodes [NODE] [--extender URL]
//   kubectl gapless explain NAMESPACE/POD [-f POD_JSON] [--extender URL]
//   kubectl gapless ui [--listen HOST:PORT] [--open] [--extender URL]
//
// With --extender the extender is called directly; without, through the kubeconfig's API server
// (service proxy to gapless-extender-metrics in gapless-system). Without -f the pod is read from
// the API server. Thin: fetches, then renders with gapless::cli (include/gapless/cli/views.h).
#include <httplib.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "gapless/cli/views.h"
#include "gapless/k8s/api_client.h"
#include "kubectl_gapless_ui.h"

using namespace gapless;
using nlohmann::json;

namespace {

struct Options {
  std::string extender, kubeconfig, context, node, who, pod_file;
  std::string listen = "127.0.0.1:8899";  // ui: where the local forwarder listens
  bool open = false;                      // ui: run xdg-open on the URL
};

// One call: method, path, body -> the JSON answer.
using Call =
    std::function<Result<json>(const std::string&, const std::string&, const std::string&)>;

Result<json> parse_answer(const std::string& where, int status, const std::string& body) {
  if (status != 200) return Error{where + ": HTTP " + std::to_string(status) + " " + body};
  if (!json::accept(body)) return Error{where + ": the answer is not JSON"};
  return json::parse(body);
}

Call direct(const std::string& url) {
  return [url](const std::string& method, const std::string& path, const std::string& body) {
    httplib::Client client(url);
    client.set_connection_timeout(5);
    client.set_read_timeout(30);
    auto res = method == "GET" ? client.Get(path) : client.Post(path, body, "application/json");
    if (!res) return Result<json>(Error{url + path + ": " + httplib::to_string(res.error())});
    return parse_answer(url + path, res->status, res->body);
  };
}

std::string default_kubeconfig() {
  if (const char* env = std::getenv("KUBECONFIG"); env != nullptr && *env != '\0') {
    const std::string all = env;
    return all.substr(0, all.find(':'));
  }
  const char* home = std::getenv("HOME");
  return std::string(home != nullptr ? home : "") + "/.kube/config";
}

// Calls through the API server; `via_proxy`: paths go to the extender's Service proxy.
Result<Call> api_server(const Options& o, bool via_proxy) {
  auto config =
      k8s::kubeconfig_config(o.kubeconfig.empty() ? default_kubeconfig() : o.kubeconfig, o.context);
  if (!config) return Error{config.error()};
  std::shared_ptr<k8s::ApiTransport> api = std::make_shared<k8s::ApiClient>(std::move(*config));
  return Call([api, via_proxy](const std::string& method, const std::string& path,
                               const std::string& body) -> Result<json> {
    const std::string full = via_proxy ? cli::proxy_path(path) : path;
    auto r = api->call(method, full, body);
    if (!r) return Error{r.error()};
    return parse_answer(full, r->status, r->body);
  });
}

// kubectl gapless ui. With --extender the page is there already: print (and open) its URL.
// Without, the browser cannot authenticate to the API server, so serve the page locally and
// fetch every file and JSON through the service proxy with the kubeconfig's credentials.
int ui(const Options& o) {
  const std::string opener = o.open ? "xdg-open" : "";
  if (!o.extender.empty()) {
    std::string base = o.extender;
    while (!base.empty() && base.back() == '/') base.pop_back();
    std::printf("%s/ui/\n", base.c_str());
    std::fflush(stdout);
    return cli::open_url(opener, base + "/ui/") ? 0 : 1;
  }
  auto config =
      k8s::kubeconfig_config(o.kubeconfig.empty() ? default_kubeconfig() : o.kubeconfig, o.context);
  if (!config) {
    std::fprintf(stderr, "kubectl-gapless: %s\n", config.error().c_str());
    return 1;
  }
  auto api = std::make_shared<k8s::ApiClient>(std::move(*config));
  cli::FetchFn fetch = [api](const std::string& path) -> Result<std::pair<int, std::string>> {
    auto r = api->call("GET", cli::proxy_path(path), "", "application/json");
    if (!r) return Error{r.error()};
    return std::pair{r->status, std::move(r->body)};
  };
  return cli::serve_ui(o.listen, fetch, opener);
}

Result<json> read_json(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Error{"cannot read " + path};
  std::stringstream s;
  s << in.rdbuf();
  if (!json::accept(s.str())) return Error{path + " is not JSON"};
  return json::parse(s.str());
}

Result<json> the_pod(const Options& o) {
  if (!o.pod_file.empty()) return read_json(o.pod_file);
  auto path = cli::pod_path(o.who);
  if (!path) return Error{path.error()};
  auto api = api_server(o, /*via_proxy=*/false);
  if (!api) return Error{api.error()};
  return (*api)("GET", *path, "");
}

Result<std::string> run(const Options& o, bool nodes) {
  auto call =
      o.extender.empty() ? api_server(o, /*via_proxy=*/true) : Result<Call>(direct(o.extender));
  if (!call) return Error{call.error()};
  auto state = (*call)("GET", "/debug/state", "");
  if (!state) return Error{state.error()};
  if (nodes) return cli::render_nodes(*state, o.node);
  auto pod = the_pod(o);
  if (!pod) return Error{pod.error()};
  auto body = cli::explain_request(*pod, o.who, *state);
  if (!body) return Error{body.error()};
  auto answer = (*call)("POST", "/debug/explain", *body);
  if (!answer) return Error{answer.error()};
  return cli::render_explanation(*answer);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"kubectl gapless: what the Gapless scheduler extender sees and decides"};
  app.require_subcommand(1);
  app.fallthrough();  // options after the subcommand, as kubectl users write them
  Options o;
  app.add_option(
      "--extender", o.extender,
      "the extender's base URL, e.g. http://localhost:8888; without it, the API server "
      "of the kubeconfig proxies to the Service gapless-system/gapless-extender-metrics");
  app.add_option("--kubeconfig", o.kubeconfig, "kubeconfig (default: $KUBECONFIG, ~/.kube/config)");
  app.add_option("--context", o.context, "kubeconfig context (default: current-context)");
  CLI::App* nodes_cmd = app.add_subcommand("nodes", "each node's GPU map");
  nodes_cmd->add_option("NODE", o.node, "only this node");
  CLI::App* explain_cmd = app.add_subcommand("explain", "why a pod would go where");
  explain_cmd->add_option("NAMESPACE/POD", o.who, "the pod")->required();
  explain_cmd->add_option("-f,--filename", o.pod_file,
                          "the pod as JSON (kubectl get pod -o json); default: read it from the "
                          "API server");
  CLI::App* ui_cmd = app.add_subcommand(
      "ui",
      "the GPU map in the browser: prints its URL (without --extender, serves it on "
      "--listen through the API server's service proxy until Ctrl-C)");
  ui_cmd->add_option("--listen", o.listen, "HOST:PORT of the local page (port 0: any)")
      ->capture_default_str();
  ui_cmd->add_flag("--open", o.open, "open the URL with xdg-open");
  CLI11_PARSE(app, argc, argv);
  if (ui_cmd->parsed()) return ui(o);

  Result<std::string> out = run(o, nodes_cmd->parsed());
  if (!out) {
    std::fprintf(stderr, "kubectl-gapless: %s\n", out.error().c_str());
    return 1;
  }
  std::fputs(out->c_str(), stdout);
  return 0;
}
