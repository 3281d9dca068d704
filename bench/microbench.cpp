// gapless-microbench: latency and throughput of the extender's verbs on generated clusters of
// 8-GPU nodes (HGX H100, DGX-1 V100, A100 with MIG, T4 PCIe), half full, with a stream of pods
// (whole 1/2/4/8, shared, MIG), each filtered, prioritized and bound, the oldest released after
// every bind.
//
//   gapless-microbench                           # 1,000 / 5,000 / 10,000 nodes, every mode
//   gapless-microbench --nodes 5000 --modes engine --pods 2000
//   gapless-microbench --nodes 5000 --modes engine,http --policy policies/bundle.yaml
//   gapless-microbench --nodes 1000 --modes http --attack 200,50   # issue 17: under attack
//   ... --tls-cert c.pem --tls-key k.pem                           # the same over HTTPS
//   gapless-microbench --parse 100000,200000                       # issue 17: parse time
//   gapless-microbench --nodes 1000 --modes verb-full --full-pods 200  # full-node, no HTTP
//   gapless-microbench --nodes 10000 --modes verb      # nodeCache filter, no HTTP
//   gapless-microbench --nodes 10000 --modes metrics    # one GET /metrics's work, per scrape
//   gapless-microbench --nodes 5000 --modes rebuild     # restart: lists -> model (10 pods/node)
//   gapless-microbench --nodes 10000 --modes engine --quotas  # what namespace quotas cost
//
// Modes: engine (in-process, no JSON, with and without the verdict cache), http (nodeCache:
// NodeNames), http-full (full-node: Node objects in every request), verb and verb-full (the
// server's side of their filter calls: Extender::filter without HTTP), metrics
// (Extender::metrics_text, what GET /metrics serves, under a mix learned from the stream). Prints
// one markdown table.
#include <malloc.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include "gapless/k8s/binder.h"
#include "gapless/placement/profile.h"
#include "gapless/policy/loader.h"
#include "gapless/server/extender.h"
#include "latency_runs.h"
#include "pod_stream.h"
#include "rebuild.h"
#include "synthetic_cluster.h"

using namespace gapless;

namespace {

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<std::size_t>(p * static_cast<double>(v.size())))];
}

// Resident set size of this process, in MiB (Linux).
double rss_mib() {
  std::ifstream status("/proc/self/status");
  std::string key;
  while (status >> key) {
    if (key == "VmRSS:") {
      double kib = 0;
      status >> kib;
      return kib / 1024.0;
    }
    status.ignore(1 << 20, '\n');
  }
  return 0;
}

// Heap bytes the model of `nodes` nodes takes, per GPU (allocations of the fill included).
double model_bytes_per_gpu(int nodes, double fill) {
  const std::size_t before = mallinfo2().uordblks;
  const model::Cluster c = bench::synthetic_cluster(nodes, fill, 42);
  const std::size_t after = mallinfo2().uordblks;
  return static_cast<double>(after - before) / (nodes * 8.0);
}

void print_run(int nodes, const bench::LatencyRun& run, int clients) {
  const double pairs_per_s = run.pods / run.wall_s;
  std::string extra;
  if (run.cache_hits + run.cache_misses > 0) {
    char buf[64];
    std::snprintf(buf, sizeof buf, ", cache hits %.1f %%",
                  100.0 * run.cache_hits / static_cast<double>(run.cache_hits + run.cache_misses));
    extra = buf;
  }
  for (const char* verb :
       {"filter", "prioritize", "filter+prioritize", "bind", "mix change", "warm-up", "/metrics"}) {
    auto it = run.ms.find(verb);
    if (it == run.ms.end()) continue;
    const auto& v = it->second;
    std::printf("| %d | %s | %d | %s | %zu | %.3f | %.3f | %.3f | %.0f |\n", nodes,
                run.mode.c_str(), run.mode.rfind("http", 0) == 0 ? clients : 1, verb, v.size(),
                percentile(v, 0.5), percentile(v, 0.99), *std::max_element(v.begin(), v.end()),
                pairs_per_s);
  }
  std::fprintf(stderr, "  %d nodes, %s: %d pods, %d bound, %.2f s%s, RSS %.0f MiB\n", nodes,
               run.mode.c_str(), run.pods, run.bound, run.wall_s, extra.c_str(), rss_mib());
}

// Issue 17, finding 2: one filter call on {"x":[{},{},...]} with `objects` empty objects (every
// verb parses the whole body first; the parse was quadratic in the objects of an array).
void print_parse(int objects) {
  std::string body = "{\"x\":[";
  for (int i = 0; i < objects; ++i) body += i == 0 ? "{}" : ",{}";
  body += "]}";
  server::Metrics metrics;
  k8s::InMemoryBinder binder;
  server::Extender extender(bench::synthetic_cluster(10, 0.5, 42), placement::builtin_policy(),
                            binder, metrics);
  const auto t0 = std::chrono::steady_clock::now();
  extender.filter(body);
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::printf("| %d | %zu | %.1f |\n", objects, body.size(), ms);
}

// `scrapes` calls of what GET /metrics serves, on a cluster of `nodes` nodes whose mix was
// learned from 200 pods of the stream (each filtered once against one node).
bench::LatencyRun run_scrapes(int nodes, double fill, int scrapes) {
  server::Metrics metrics;
  server::InMemoryBinder binder;
  server::Extender ext(bench::synthetic_cluster(nodes, fill, 42), placement::builtin_policy(),
                       binder, metrics);
  for (const bench::StreamPod& p : bench::pod_stream(200, 7)) {
    ext.filter(nlohmann::json{{"Pod", p.pod}, {"NodeNames", {"node-00000"}}}.dump());
  }
  bench::LatencyRun run;
  run.mode = "metrics";
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < scrapes; ++i) {
    const auto t = std::chrono::steady_clock::now();
    const std::string text = ext.metrics_text();
    const std::chrono::duration<double, std::milli> ms = std::chrono::steady_clock::now() - t;
    run.ms["/metrics"].push_back(ms.count());
    run.bound += text.empty() ? 0 : 1;
  }
  const std::chrono::duration<double> wall = std::chrono::steady_clock::now() - start;
  run.wall_s = wall.count();
  run.pods = scrapes;
  return run;
}

// One line, outside the latency table's columns: a rebuild is one event, not a stream of calls.
void print_rebuild(const bench::RebuildRun& r) {
  const double ms = (r.parse_s + r.apply_s) * 1e3;
  std::printf(
      "| %d | rebuild (%zu pods, %.0f MB of lists; %zu of %zu GPU allocations restored) | "
      "1 | parse %.2f s + apply %.2f s; node relist after %.2f s | 1 | %.0f | %.0f | %.0f "
      "| |\n",
      r.nodes, r.pods, static_cast<double>(r.list_bytes) / 1e6, r.restored, r.expected, r.parse_s,
      r.apply_s, r.relist_s, ms, ms, ms);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"gapless-microbench: extender verb latency and throughput"};
  std::vector<int> sizes = {1000, 5000, 10000};
  std::vector<std::string> modes = {"engine", "http", "http-full"};
  int pods = 1000;
  int full_pods = 40;
  // kube-scheduler runs one pod's filter and prioritize at a time (its scheduling cycle is
  // sequential; only binds overlap): one client is the path a cluster takes. More clients
  // measure throughput under concurrency, with the clients' own CPU beside the server's.
  int clients = 1;
  double fill = 0.5;
  bool baseline = true;
  app.add_option("--nodes", sizes, "cluster sizes (8 GPUs per node)")->delimiter(',');
  app.add_option("--modes", modes, "engine, http, http-full, verb, verb-full, metrics, rebuild")
      ->delimiter(',');
  app.add_option("--pods", pods, "pods in the stream (engine, http)");
  app.add_option("--full-pods", full_pods, "pods in the stream for http-full (slow: MBs per call)");
  app.add_option("--clients", clients,
                 "concurrent HTTP clients (1, the default, as kube-scheduler's scheduling cycle)");
  app.add_option("--fill", fill, "fraction of GPUs taken before the stream starts");
  std::vector<std::string> policy_files;
  app.add_option("--policy", policy_files,
                 "engine, http, http-full: also run with this policy file (the built-in default "
                 "always runs first), e.g. policies/bundle.yaml");
  int pods_per_node = 10;
  app.add_option("--pods-per-node", pods_per_node, "rebuild: pods per node in the PodList");
  app.add_flag("!--no-baseline", baseline, "engine: skip the run without the verdict cache");
  bool quotas = false;
  app.add_flag("--quotas", quotas,
               "engine: also run under a policy with namespace quotas (checked, never reached)");
  std::vector<int> attack;
  app.add_option("--attack", attack,
                 "http: IDLE,SLOW connections open beside the clients (idle: send nothing; slow: "
                 "one byte every 500 ms); also runs http without them for comparison")
      ->delimiter(',')
      ->expected(2);
  std::string tls_cert, tls_key;
  app.add_option("--tls-cert", tls_cert,
                 "http: serve HTTPS with this PEM certificate (with --tls-key)");
  app.add_option("--tls-key", tls_key, "http: the PEM private key of --tls-cert");
  std::vector<int> parse_objects;
  app.add_option("--parse", parse_objects,
                 "only time one filter call on bodies of this many empty objects in an array")
      ->delimiter(',');
  CLI11_PARSE(app, argc, argv);

  if (!parse_objects.empty()) {
    std::printf("| objects | body bytes | filter ms |\n|---:|---:|---:|\n");
    for (int n : parse_objects) print_parse(n);
    return 0;
  }

  // The built-in default first, then each --policy file.
  std::vector<std::pair<std::string, placement::Policy>> policies = {
      {"default", placement::builtin_policy()}};
  for (const std::string& f : policy_files) {
    auto p = policy::load_policy_file(f);
    if (!p) {
      std::fprintf(stderr, "%s\n", p.error().c_str());
      return 2;
    }
    policies.emplace_back(std::filesystem::path(f).filename().string(), std::move(*p));
  }

  std::printf("| nodes | mode | clients | verb | calls | p50 ms | p99 ms | max ms | pods/s |\n");
  std::printf("|---:|---|---:|---|---:|---:|---:|---:|---:|\n");
  for (int n : sizes) {
    std::fprintf(stderr, "%d nodes x 8 GPUs: model %.0f bytes per GPU\n", n,
                 model_bytes_per_gpu(n, fill));
    for (std::size_t pi = 0; pi < policies.size(); ++pi) {
      bench::LatencyOptions o;
      o.nodes = n;
      o.fill = fill;
      o.clients = clients;
      o.policy = &policies[pi].second;
      o.policy_name = policies[pi].first;
      o.tls_cert = tls_cert;
      o.tls_key = tls_key;
      for (const std::string& mode : modes) {
        if (mode == "engine") {
          const auto stream = bench::pod_stream(pods, 7);
          if (baseline) {
            o.cache = false;
            print_run(n, bench::run_engine(stream, o), 1);
          }
          o.cache = true;
          print_run(n, bench::run_engine(stream, o), 1);
          if (quotas) {
            o.quotas = true;
            print_run(n, bench::run_engine(stream, o), 1);
            o.quotas = false;
          }
        } else if (mode == "rebuild" || mode == "metrics") {
          if (pi != 0) continue;  // the policy plays no part
          if (mode == "rebuild") {
            print_rebuild(bench::run_rebuild(n, pods_per_node));
          } else {
            print_run(n, run_scrapes(n, fill, 20), 1);
          }
        } else if (mode == "verb" || mode == "verb-full") {
          o.full_node = mode == "verb-full";
          print_run(n, bench::run_verb(bench::pod_stream(o.full_node ? full_pods : pods, 7), o), 1);
        } else if (mode == "http" || mode == "http-full") {
          o.full_node = mode == "http-full";
          print_run(n, bench::run_http(bench::pod_stream(o.full_node ? full_pods : pods, 7), o),
                    clients);
          if (attack.size() == 2) {
            o.idle_connections = attack[0];
            o.slow_connections = attack[1];
            print_run(n, bench::run_http(bench::pod_stream(o.full_node ? full_pods : pods, 7), o),
                      clients);
            o.idle_connections = o.slow_connections = 0;
          }
        } else {
          std::fprintf(stderr, "unknown mode %s\n", mode.c_str());
          return 2;
        }
      }
    }
  }
  return 0;
}
