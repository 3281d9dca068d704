#include "latency_runs.h"

#include <httplib.h>
#include <netinet/in.h>
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <deque>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string_view>
#include <thread>

#include "gapless/k8s/pod_request.h"
#include "gapless/placement/scheduler.h"
#include "gapless/server/extender.h"
#include "gapless/server/http_server.h"
#include "gapless/server/score_warmer.h"
#include "synthetic_cluster.h"

namespace gapless::bench {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// Index of the highest score, the first on ties (kube-scheduler breaks ties at random).
std::size_t best_of(const std::vector<int>& scores) {
  std::size_t best = 0;
  for (std::size_t i = 1; i < scores.size(); ++i) {
    if (scores[i] > scores[best]) best = i;
  }
  return best;
}

// Waits, as kube-scheduler waits for /readyz, until the warmer has prepared the cache; returns
// how long that took (ms).
double wait_caught_up(const server::ScoreWarmer& warmer) {
  const auto t0 = Clock::now();
  while (!warmer.caught_up()) std::this_thread::sleep_for(std::chrono::microseconds(200));
  return ms_since(t0);
}

// Pods to release, oldest first: the fill's, then the stream's in bind order.
class Departures {
 public:
  explicit Departures(const model::Cluster& c) {
    for (const model::Allocation* a : c.allocations()) queue_.push_back(a->pod_uid);
  }
  void bound(const std::string& uid) {
    std::lock_guard lock(mu_);
    queue_.push_back(uid);
  }
  std::string next() {
    std::lock_guard lock(mu_);
    if (queue_.empty()) return {};
    std::string uid = std::move(queue_.front());
    queue_.pop_front();
    return uid;
  }

 private:
  std::mutex mu_;
  std::deque<std::string> queue_;
};

}  // namespace

namespace {

// Quotas every check of the stream's pods (namespace "bench") walks in full without refusing.
// `p`, with these quotas when `quotas`.
placement::Policy with_quotas(placement::Policy p, bool quotas) {
  if (!quotas) return p;
  for (int i = 0; i < 20; ++i) {
    placement::Quota q;
    q.name = "other-" + std::to_string(i);
    q.namespaces = {"team-" + std::to_string(i)};
    q.limits[placement::QuotaResource::kWholeGpus] = 8;
    p.quotas.push_back(std::move(q));
  }
  placement::Quota q;
  q.name = "bench";
  q.namespaces = {"bench", "bench-2"};
  for (placement::QuotaResource r : placement::kAllQuotaResources) q.limits[r] = 1000000000000;
  q.whole_gpus_percent = 100;
  for (const char* m :
       {"NVIDIA-H100-80GB-HBM3", "Tesla-V100-SXM2-32GB", "NVIDIA-A100-SXM4-80GB", "Tesla-T4"}) {
    q.per_model[m][placement::QuotaResource::kWholeGpus] = 1000000000000;
  }
  p.quotas.push_back(std::move(q));
  return p;
}

}  // namespace

namespace {

// The stream's shapes are those of the bound pods, so a mix change is rare in it (at 2^k pods
// seen). What one costs, on its own row: pods of five multi-GPU shapes never seen, each of which
// rebuilds the mix (the learner does at once for a new multi-GPU shape).
void time_mix_changes(placement::Scheduler& sched, LatencyRun* run) {
  for (int i = 0; i < 5; ++i) {
    model::PodInfo info;
    info.ns = "bench";
    info.name = info.uid = "novel-" + std::to_string(i);
    model::GpuRequest req;
    req.kind = model::RequestKind::kWhole;
    req.whole = 2 + i % 3;
    req.host = {1000 + 1000 * i, 1024};
    const std::uint64_t before = sched.mix_version();
    const auto t0 = Clock::now();
    sched.observe(info, req);
    const double ms = ms_since(t0);
    if (sched.mix_version() != before) run->ms["mix change"].push_back(ms);
  }
}

}  // namespace

LatencyRun run_engine(const std::vector<StreamPod>& pods, const LatencyOptions& options) {
  LatencyRun run;
  run.mode =
      std::string(options.cache ? "engine" : "engine, no cache") + ", " + options.policy_name;
  if (options.quotas) run.mode += ", quotas";
  placement::SchedulerOptions so;
  so.check_host = false;  // as the extender runs it, behind kube-scheduler
  so.use_cache = options.cache;
  std::vector<BoundPod> bound;
  placement::Scheduler sched(
      synthetic_cluster(options.nodes, options.fill, 42, &bound),
      with_quotas(options.policy ? *options.policy : placement::builtin_policy(), options.quotas),
      so);
  for (const auto& [info, req] : bound) sched.observe(info, req);  // as the informer does
  // As gapless-extender runs: the warmer prepares the cache for the shapes asked most at start
  // (readiness waits for it) and again after every mix change, beside the stream.
  server::ScoreWarmer warmer(sched);
  run.ms["warm-up"].push_back(wait_caught_up(warmer));
  std::vector<std::string> names;
  std::unique_ptr<Departures> departures;
  sched.read([&](const model::Cluster& c) {
    for (const model::Node* n : c.nodes()) names.push_back(n->name);
    departures = std::make_unique<Departures>(c);
  });
  const auto loaded = sched.policy();
  const placement::Profile& profile = loaded->policy.profiles[0];

  const auto start = Clock::now();
  for (const StreamPod& p : pods) {
    auto parsed = k8s::parse_pod(p.pod);
    if (!parsed) throw std::runtime_error(p.name + ": " + parsed.error());
    const model::GpuRequest& req = parsed->request;
    const auto t0 = Clock::now();
    const std::uint64_t mix_before = sched.mix_version();
    sched.observe(parsed->info, req);
    // The learned mix is rebuilt when the pods seen reach 2^k: rare, but it re-scores every
    // node. Its cost is reported on its own row, and is part of that call's filter too.
    if (sched.mix_version() != mix_before) run.ms["mix change"].push_back(ms_since(t0));
    auto f = sched.filter(*loaded, parsed->info, req, profile, names);
    const double filter_ms = ms_since(t0);
    const auto t1 = Clock::now();
    auto scores =
        placement::Scheduler::normalize(f.passed, sched.score(*loaded, req, profile, f.passed));
    const double prioritize_ms = ms_since(t1);
    run.ms["filter"].push_back(filter_ms);
    run.ms["prioritize"].push_back(prioritize_ms);
    run.ms["filter+prioritize"].push_back(filter_ms + prioritize_ms);
    ++run.pods;
    if (f.passed.empty()) continue;
    const auto t2 = Clock::now();
    auto a = sched.reserve(parsed->info, req, profile, f.passed[best_of(scores)]);
    run.ms["bind"].push_back(ms_since(t2));
    if (!a) continue;
    ++run.bound;
    departures->bound(parsed->info.uid);
    sched.release(departures->next());
  }
  run.wall_s = std::chrono::duration<double>(Clock::now() - start).count();
  run.cache_hits = loaded->cache.hits();
  run.cache_misses = loaded->cache.misses();
  time_mix_changes(sched, &run);
  return run;
}

namespace {

// What one client measured; merged into the run at the end.
struct ClientLog {
  std::map<std::string, std::vector<double>> ms;
  int pods = 0, bound = 0;
  std::string error;
};

// The request bodies of one mode, built from pre-serialized parts (the client's own JSON work
// is not what is being measured).
class Bodies {
 public:
  Bodies(const model::Cluster& c, bool full) : full_(full) {
    for (const model::Node* n : c.nodes()) {
      names_.push_back(n->name);
      if (full) objects_[n->name] = node_object(*n).dump();
    }
    all_ = nodes_part(names_);
  }
  std::string filter(const std::string& pod) const { return "{\"Pod\":" + pod + "," + all_ + "}"; }
  // A bound on any body made here: every node, and a pod of up to 64 KiB.
  std::size_t largest() const { return all_.size() + 64 * 1024; }
  std::string prioritize(const std::string& pod, const std::vector<std::string>& names) const {
    return "{\"Pod\":" + pod + "," + nodes_part(names) + "}";
  }
  // Names of the nodes a filter answer passed.
  std::vector<std::string> passed(const json& answer) const {
    std::vector<std::string> out;
    if (!full_) return answer.at("NodeNames").get<std::vector<std::string>>();
    for (const json& item : answer.at("Nodes").at("items")) {
      out.push_back(item.at("metadata").at("name").get<std::string>());
    }
    return out;
  }

 private:
  std::string nodes_part(const std::vector<std::string>& names) const {
    if (!full_) return "\"NodeNames\":" + json(names).dump();
    std::string s = "\"Nodes\":{\"metadata\":{},\"items\":[";
    for (std::size_t i = 0; i < names.size(); ++i) {
      if (i > 0) s += ',';
      s += objects_.at(names[i]);
    }
    return s + "]}";
  }

  bool full_;
  std::vector<std::string> names_;
  std::map<std::string, std::string> objects_;
  std::string all_;
};

void client_loop(int id, int clients, const std::string& url, const std::vector<StreamPod>& pods,
                 const Bodies& bodies, server::Extender& extender, Departures& departures,
                 ClientLog& log) try {
  httplib::Client cli(url);  // https:// with --tls-cert
  cli.enable_server_certificate_verification(false);
  cli.set_keep_alive(true);
  cli.set_tcp_nodelay(true);  // as Go's net/http (kube-scheduler) does by default
  cli.set_read_timeout(120, 0);
  auto post = [&](const char* path, const std::string& body, double* ms) {
    const auto t0 = Clock::now();
    auto res = cli.Post(path, body, "application/json");
    *ms = ms_since(t0);
    if (!res || res->status != 200)
      throw std::runtime_error(std::string("POST ") + path + " failed");
    // The client reads NodeNames (or Nodes) and Error; it skips the maps of rejected nodes, so
    // its own parsing takes less of the CPU the server is measured on (kube-scheduler runs in
    // another process, usually on other cores).
    return json::parse(res->body, [](int depth, json::parse_event_t event, json& parsed) {
      return !(depth == 1 && event == json::parse_event_t::key &&
               (parsed == "FailedNodes" || parsed == "FailedAndUnresolvableNodes"));
    });
  };
  for (std::size_t i = static_cast<std::size_t>(id); i < pods.size();
       i += static_cast<std::size_t>(clients)) {
    const StreamPod& p = pods[i];
    const std::string pod = p.pod.dump();
    double f_ms = 0, p_ms = 0, b_ms = 0;
    const json f = post("/filter", bodies.filter(pod), &f_ms);
    if (!f.at("Error").get<std::string>().empty())
      throw std::runtime_error(f.at("Error").get<std::string>());
    const std::vector<std::string> passed = bodies.passed(f);
    const json s = post("/prioritize", bodies.prioritize(pod, passed), &p_ms);
    log.ms["filter"].push_back(f_ms);
    log.ms["prioritize"].push_back(p_ms);
    log.ms["filter+prioritize"].push_back(f_ms + p_ms);
    ++log.pods;
    if (passed.empty()) continue;
    std::vector<int> scores;
    for (const json& h : s) scores.push_back(h.at("Score").get<int>());
    const json meta = p.pod.at("metadata");
    const json bind = {{"PodName", meta.at("name")},
                       {"PodNamespace", meta.at("namespace")},
                       {"PodUID", meta.at("uid")},
                       {"Node", passed[best_of(scores)]}};
    const json b = post("/bind", bind.dump(), &b_ms);
    log.ms["bind"].push_back(b_ms);
    if (!b.value("Error", std::string()).empty()) continue;  // lost a race for the node: fine
    ++log.bound;
    departures.bound(meta.at("uid").get<std::string>());
    const std::string gone = departures.next();
    extender.mutate([&](model::Cluster& c) { c.release(gone); });  // what the informer does
  }
} catch (const std::exception& e) {
  log.error = e.what();
}

// What a slow plain-HTTP attacker trickles: a filter request whose body never completes.
constexpr std::string_view kSlowRequest =
    "POST /filter HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    "Content-Length: 100000\r\n\r\n{\"Pod\":{\"metadata\":{\"name\":\"slow\"}}";

// A TLS client's first flight (its ClientHello), made with memory BIOs: what a slow HTTPS
// attacker trickles.
std::string client_hello() {
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  SSL* ssl = SSL_new(ctx);
  BIO* out = BIO_new(BIO_s_mem());
  SSL_set_bio(ssl, BIO_new(BIO_s_mem()), out);  // owned by ssl
  SSL_set_connect_state(ssl);
  SSL_do_handshake(ssl);  // writes the ClientHello, then wants the server's answer
  std::string hello(static_cast<std::size_t>(BIO_ctrl_pending(out)), '\0');
  BIO_read(out, hello.data(), static_cast<int>(hello.size()));
  SSL_free(ssl);
  SSL_CTX_free(ctx);
  return hello;
}

// Idle and slow connections against 127.0.0.1:port until `stop`; bounded by the counts given.
class Attack {
 public:
  // `request`: what a slow client trickles (a filter request, or a ClientHello over HTTPS).
  Attack(int port, int idle, int slow, std::string request)
      : port_(port), request_(std::move(request)) {
    if (idle + slow == 0) return;
    for (int i = 0; i < idle; ++i) idle_.push_back(connect_once());
    slow_.assign(static_cast<std::size_t>(slow), Slow{});
    thread_ = std::thread([this] { trickle(); });
  }
  ~Attack() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    for (int fd : idle_) ::close(fd);
    for (const Slow& s : slow_) ::close(s.fd);
  }
  Attack(const Attack&) = delete;
  Attack& operator=(const Attack&) = delete;

 private:
  struct Slow {
    int fd = -1;
    std::size_t sent = 0;
  };

  int connect_once() const {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port_));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    return fd;
  }

  // Each slow client sends its next byte every 500 ms; one the server closed starts over.
  void trickle() {
    while (!stop_) {
      for (Slow& s : slow_) {
        if (s.fd < 0) s = Slow{connect_once(), 0};
        const char ch = request_[s.sent % request_.size()];
        if (::send(s.fd, &ch, 1, MSG_NOSIGNAL | MSG_DONTWAIT) != 1) {
          ::close(s.fd);
          s.fd = -1;
          continue;
        }
        ++s.sent;
      }
      for (int i = 0; i < 50 && !stop_; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }

  int port_;
  std::string request_;
  std::vector<int> idle_;
  std::vector<Slow> slow_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace

LatencyRun run_verb(const std::vector<StreamPod>& pods, const LatencyOptions& options) {
  server::Metrics metrics;
  k8s::InMemoryBinder binder;
  model::Cluster cluster = synthetic_cluster(options.nodes, options.fill, 42);
  const Bodies bodies(cluster, options.full_node);
  server::Extender ext(std::move(cluster),
                       options.policy ? *options.policy : placement::builtin_policy(), binder,
                       metrics);
  std::vector<std::string> requests;
  for (const StreamPod& p : pods) requests.push_back(bodies.filter(p.pod.dump()));
  LatencyRun run;
  run.mode = options.full_node ? "full-node filter, no HTTP" : "nodeCache filter, no HTTP";
  for (const std::string& body : requests) ext.filter(body);
  const auto start = Clock::now();
  for (const std::string& body : requests) {
    const auto t = Clock::now();
    const std::string answer = ext.filter(body);
    run.ms["filter"].push_back(std::chrono::duration<double, std::milli>(Clock::now() - t).count());
    run.bound += answer.find("\"Error\":\"\"") != std::string::npos ? 1 : 0;
  }
  run.wall_s = std::chrono::duration<double>(Clock::now() - start).count();
  run.pods = static_cast<int>(pods.size());
  return run;
}

LatencyRun run_http(const std::vector<StreamPod>& pods, const LatencyOptions& options) {
  LatencyRun run;
  run.mode = std::string(options.full_node ? "http full-node" : "http nodeCache") + ", " +
             options.policy_name;
  std::vector<BoundPod> bound;
  model::Cluster cluster = synthetic_cluster(options.nodes, options.fill, 42, &bound);
  const Bodies bodies(cluster, options.full_node);
  Departures departures(cluster);
  k8s::InMemoryBinder binder;
  server::Metrics metrics;
  server::Extender extender(std::move(cluster),
                            options.policy ? *options.policy : placement::builtin_policy(), binder,
                            metrics);
  for (const auto& [info, req] : bound) extender.scheduler().observe(info, req);
  server::ScoreWarmer warmer(extender.scheduler());  // as gapless-extender runs
  run.ms["warm-up"].push_back(wait_caught_up(warmer));
  server::HttpOptions http;
  // The server's default limit, which sets its memory budget (body_budget.h) as a user's runs;
  // raised only for bodies it would refuse (full-node bodies of 10,000 nodes are ~40 MB).
  http.max_body_bytes = std::max(http.max_body_bytes, bodies.largest());
  http.tls_cert_file = options.tls_cert;
  http.tls_key_file = options.tls_key;
  const bool https = !options.tls_cert.empty();
  if (https) run.mode += ", https";
  server::HttpServer srv(extender, http);
  auto port = srv.bind("127.0.0.1", 0);
  if (!port) throw std::runtime_error(port.error());
  std::thread serving([&] { srv.serve(); });
  const std::string url =
      (https ? "https://127.0.0.1:" : "http://127.0.0.1:") + std::to_string(*port);

  std::optional<Attack> attack;
  attack.emplace(*port, options.idle_connections, options.slow_connections,
                 https ? client_hello() : std::string(kSlowRequest));
  if (options.idle_connections + options.slow_connections > 0) {
    run.mode += " attack " + std::to_string(options.idle_connections) + " idle + " +
                std::to_string(options.slow_connections) + " slow";
  }
  std::vector<ClientLog> logs(static_cast<std::size_t>(options.clients));
  const auto start = Clock::now();
  std::vector<std::thread> clients;
  for (int id = 0; id < options.clients; ++id) {
    clients.emplace_back(client_loop, id, options.clients, std::cref(url), std::cref(pods),
                         std::cref(bodies), std::ref(extender), std::ref(departures),
                         std::ref(logs[id]));
  }
  for (std::thread& t : clients) t.join();
  run.wall_s = std::chrono::duration<double>(Clock::now() - start).count();
  attack.reset();
  srv.stop();
  serving.join();
  for (const ClientLog& log : logs) {
    if (!log.error.empty()) throw std::runtime_error("client: " + log.error);
    for (const auto& [verb, v] : log.ms)
      run.ms[verb].insert(run.ms[verb].end(), v.begin(), v.end());
    run.pods += log.pods;
    run.bound += log.bound;
  }
  return run;
}

}  // namespace gapless::bench
