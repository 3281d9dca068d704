// kubectl-gapless: the kubectl plugin that shows what Gapless sees and decides.
//
//   kubectl gapless nodes [NODE] [--extender URL]
//   kubectl gapless explain NAMESPACE/POD [-f POD_JSON] [--extender URL]
//   kubectl gapless ui [--listen HOST:PORT] [--open] [--extender URL]
//
// With --extender the extender is called directly; without, through `kubectl port-forward` to
// its loopback port in a pod of deploy/gapless-scheduler (gapless/cli/port_forward.h): the
// user's own RBAC decides. Without -f the pod is read from the kubeconfig's API server. Thin:
// fetches, then renders with gapless::cli (include/gapless/cli/views.h).
#include <httplib.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "gapless/cli/port_forward.h"
#include "gapless/cli/views.h"
#include "gapless/k8s/api_client.h"
#include "kubectl_gapless_ui.h"

using namespace gapless;
using nlohmann::json;

namespace {

struct Options {
  std::string extender, kubeconfig, context, node, who, pod_file;
  std::string listen = "127.0.0.1:8899";  // ui: where the port-forward listens
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

// Calls to the kubeconfig's API server (reading the pod for explain).
Result<Call> api_server(const Options& o) {
  auto config =
      k8s::kubeconfig_config(o.kubeconfig.empty() ? default_kubeconfig() : o.kubeconfig, o.context);
  if (!config) return Error{config.error()};
  std::shared_ptr<k8s::ApiTransport> api = std::make_shared<k8s::ApiClient>(std::move(*config));
  return Call([api](const std::string& method, const std::string& path,
                    const std::string& body) -> Result<json> {
    auto r = api->call(method, path, body);
    if (!r) return Error{r.error()};
    return parse_answer(path, r->status, r->body);
  });
}

// kubectl port-forward as the user runs it: $KUBECTL or kubectl, with the plugin's kubeconfig.
cli::PortForwardSpec forward_spec(const Options& o) {
  cli::PortForwardSpec spec;
  if (const char* env = std::getenv("KUBECTL"); env != nullptr && *env != '\0') spec.kubectl = env;
  spec.kubeconfig = o.kubeconfig;
  spec.context = o.context;
  return spec;
}

// kubectl gapless ui. With --extender the page is there already: print (and open) its URL.
// Without, the page is the extender's own, through the port-forward (kubectl_gapless_ui.h).
int ui(const Options& o) {
  const std::string opener = o.open ? "xdg-open" : "";
  if (o.extender.empty()) return cli::forward_ui(forward_spec(o), o.listen, opener);
  std::string base = o.extender;
  while (!base.empty() && base.back() == '/') base.pop_back();
  std::printf("%s/ui/\n", base.c_str());
  std::fflush(stdout);
  return cli::open_url(opener, base + "/ui/") ? 0 : 1;
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
  auto api = api_server(o);
  if (!api) return Error{api.error()};
  return (*api)("GET", *path, "");
}

Result<std::string> run(const Options& o, bool nodes) {
  // explain: the pod first, so a wrong name fails before any port-forward starts.
  Result<json> pod = nodes ? Result<json>(json()) : the_pod(o);
  if (!pod) return Error{pod.error()};
  std::unique_ptr<cli::PortForward> forward;  // ends kubectl on every return below
  std::string url = o.extender;
  if (url.empty()) {
    auto started = cli::PortForward::start(forward_spec(o));
    if (!started) return Error{cli::forward_failed(started.error())};
    forward = std::move(*started);
    url = forward->url();
  }
  const Call call = direct(url);
  auto state = call("GET", "/debug/state", "");
  if (!state) return Error{state.error()};
  if (nodes) return cli::render_nodes(*state, o.node);
  auto body = cli::explain_request(*pod, o.who, *state);
  if (!body) return Error{body.error()};
  auto answer = call("POST", "/debug/explain", *body);
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
      "the extender's base URL, e.g. http://localhost:8888; without it, kubectl port-forward "
      "(KUBECTL, else kubectl on PATH) to port 8888 of deploy/gapless-scheduler in "
      "gapless-system");
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
      "the GPU map in the browser: prints its URL (without --extender, port-forwards "
      "--listen to the extender until Ctrl-C)");
  ui_cmd
      ->add_option("--listen", o.listen, "HOST:PORT of the port-forward's local end (port 0: any)")
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
