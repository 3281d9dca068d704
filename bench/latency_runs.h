// The two runs of gapless-microbench over one generated cluster and one pod stream: each pod
// goes through filter, prioritize (on the nodes that passed), and bind to the best-scored node,
// and the oldest pod is released after every bind so occupancy stays where --fill put it.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "gapless/placement/profile.h"
#include "pod_stream.h"

namespace gapless::bench {

struct LatencyRun {
  std::string mode;  // "engine", "http nodeCache", "http full-node"
  // Per verb ("filter", "prioritize", "filter+prioritize", "bind"): one entry per call, in ms.
  std::map<std::string, std::vector<double>> ms;
  double wall_s = 0;  // whole stream, all clients
  int pods = 0;
  int bound = 0;
  std::uint64_t cache_hits = 0, cache_misses = 0;
};

struct LatencyOptions {
  int nodes = 1000;
  double fill = 0.5;
  int clients = 1;         // http: concurrent clients, each with its own keep-alive connection
  bool full_node = false;  // http: Node objects in every request instead of NodeNames
  bool cache = true;       // reuse verdicts of unchanged nodes (VerdictCache)
  // engine: a policy with namespace quotas that cover the stream's namespace (every limit, a
  // per-model limit per GPU model, never reached) beside 20 quotas of other namespaces: what
  // checking quotas adds to filter and reserve.
  bool quotas = false;
  // http: an attack beside the measured clients (issue 17): connections that connect and send
  // nothing, and slow clients that send a request one byte every 500 ms (reconnecting when the
  // server closes them), all open while the stream runs.
  int idle_connections = 0;
  int slow_connections = 0;
  // http: serve HTTPS with this PEM certificate and key (the clients do not verify it); slow
  // attackers then send a ClientHello one byte every 500 ms instead of a request.
  std::string tls_cert;
  std::string tls_key;
  // The policy the runs schedule with (the built-in default when null), and its name in the
  // table's mode column.
  const placement::Policy* policy = nullptr;
  std::string policy_name = "default";
};

// In-process: the placement engine alone, no JSON, one caller.
LatencyRun run_engine(const std::vector<StreamPod>& pods, const LatencyOptions& options);
// Issue 12: the server's side of a filter without HTTP: Extender::filter on the body run_http
// sends (full_node: with Node objects): read, filter, answer. Its cost shows apart from the
// loopback copies and the client. The stream runs twice, timed the second time, so the learned
// mix and the verdicts are warm as in a running cluster; nothing is bound.
LatencyRun run_verb(const std::vector<StreamPod>& pods, const LatencyOptions& options);
// Over HTTP on 127.0.0.1: an Extender behind HttpServer, `clients` threads sharing the stream.
LatencyRun run_http(const std::vector<StreamPod>& pods, const LatencyOptions& options);

}  // namespace gapless::bench
