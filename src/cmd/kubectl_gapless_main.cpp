// kubectl-gapless: the kubectl plugin that shows what Gapless sees and decides.
//
//   kubectl gapless nodes [NODE] --extender URL
//   kubectl gapless explain NAMESPACE/POD -f POD_JSON --extender URL
//
// Thin: fetches from the extender, renders with gapless::cli (include/gapless/cli/views.h).
#include <httplib.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "gapless/cli/views.h"

using namespace gapless;
using nlohmann::json;

namespace {

// GET (empty body) or POST `path` on the extender; the answer's JSON body.
Result<json> call(const std::string& url, const std::string& path, const std::string& body = "") {
  httplib::Client client(url);
  client.set_connection_timeout(5);
  client.set_read_timeout(30);
  auto res = body.empty() ? client.Get(path) : client.Post(path, body, "application/json");
  if (!res) return Error{url + path + ": " + httplib::to_string(res.error())};
  if (res->status != 200) return Error{url + path + ": HTTP " + std::to_string(res->status)};
  if (!json::accept(res->body)) return Error{url + path + ": the answer is not JSON"};
  return json::parse(res->body);
}

Result<json> read_json(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Error{"cannot read " + path};
  std::stringstream s;
  s << in.rdbuf();
  if (!json::accept(s.str())) return Error{path + " is not JSON"};
  return json::parse(s.str());
}

Result<std::string> nodes(const std::string& url, const std::string& node) {
  auto state = call(url, "/debug/state");
  if (!state) return Error{state.error()};
  return cli::render_nodes(*state, node);
}

Result<std::string> explain(const std::string& url, const std::string& who,
                            const std::string& pod_file) {
  auto pod = read_json(pod_file);
  if (!pod) return Error{pod.error()};
  auto state = call(url, "/debug/state");
  if (!state) return Error{state.error()};
  auto body = cli::explain_request(*pod, who, *state);
  if (!body) return Error{body.error()};
  auto answer = call(url, "/debug/explain", *body);
  if (!answer) return Error{answer.error()};
  return cli::render_explanation(*answer);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"kubectl gapless: what the Gapless scheduler extender sees and decides"};
  app.require_subcommand(1);
  app.fallthrough();  // --extender after the subcommand, as kubectl users write it
  std::string url, node, who, pod_file;
  app.add_option("--extender", url,
                 "the extender's base URL, e.g. http://localhost:8888 (kubectl port-forward "
                 "-n gapless-system svc/gapless-extender-metrics 8888)")
      ->required();
  CLI::App* nodes_cmd = app.add_subcommand("nodes", "each node's GPU map");
  nodes_cmd->add_option("NODE", node, "only this node");
  CLI::App* explain_cmd = app.add_subcommand("explain", "why a pod would go where");
  explain_cmd->add_option("NAMESPACE/POD", who, "the pod")->required();
  explain_cmd->add_option("-f,--filename", pod_file, "the pod as JSON (kubectl get pod -o json)")
      ->required();
  CLI11_PARSE(app, argc, argv);

  Result<std::string> out = nodes_cmd->parsed() ? nodes(url, node) : explain(url, who, pod_file);
  if (!out) {
    std::fprintf(stderr, "kubectl-gapless: %s\n", out.error().c_str());
    return 1;
  }
  std::fputs(out->c_str(), stdout);
  return 0;
}
