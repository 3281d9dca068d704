// gapless-extender: the scheduler-extender webhook.
#include <unistd.h>
#include <CLI/CLI.hpp>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <optional>
#include <thread>

#include "demo_cluster.h"
#include "gapless/k8s/api_client.h"
#include "gapless/k8s/cluster_file.h"
#include "gapless/k8s/model_pin.h"
#include "gapless/policy/loader.h"
#include "gapless/server/http_server.h"
#include "gapless/server/log.h"
#include "gapless/server/policy_watch.h"
#include "gapless/server/score_warmer.h"
#include "gapless/server/webhook.h"
#include "kube_source.h"
#include "listen_address.h"
#include "wait_ready.h"

using namespace gapless;

namespace {

// Binds that may wait for a bind thread; beyond, a bind is answered with an Error at once. A
// waiting bind holds its body (a few hundred bytes) and its connection.
constexpr std::size_t kMaxQueuedBinds = 1024;

std::string env_or(const char* name, std::string fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::string(v) : fallback;
}

// Where the claim ConfigMaps live: the pod's own namespace (downward API, or the
// ServiceAccount's), as RBAC grants ConfigMap writes there only.
std::string default_namespace() {
  std::string ns;
  std::ifstream in("/var/run/secrets/kubernetes.io/serviceaccount/namespace");
  if (!(in >> ns) || ns.empty()) ns = "gapless-system";
  return env_or("POD_NAMESPACE", ns);
}

std::string replica_name() {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0 || host[0] == '\0')
    return env_or("POD_NAME", "gapless");
  return env_or("POD_NAME", host);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"gapless-extender: GPU-topology-aware kube-scheduler extender"};
  std::string listen = "127.0.0.1:8888";
  std::string probe_listen;
  std::string prefix;
  std::string policy_file;
  std::string cluster_file;
  std::string check_policy;
  std::string kubeconfig;
  std::string context;
  std::size_t max_body = 16 * 1024 * 1024;
  int read_timeout = 30;
  int write_timeout = 30;
  std::size_t workers = server::default_workers();
  std::size_t max_queue = 64;
  // A bind waits on API requests (its claim, the Binding; before, a read of the pod too, which
  // the pod informer's copy now spares, KubeBinder::admit): with 16 threads binds capped
  // throughput near 100 pods/s on a 1,000-node test cluster, below kube-scheduler alone
  // (docs/policies.md, "Sampling"); 64 also lets more claims on one node share one write.
  std::size_t bind_threads = 64;
  int request_timeout = 10;
  std::size_t max_connections = 1024;
  std::size_t max_connections_per_peer = 256;
  std::size_t max_header_bytes = 64 * 1024;
  std::size_t max_headers = 100;
  std::size_t max_answer_bytes = 16 * 1024 * 1024;
  std::size_t probe_connections = 16;
  int deferred_timeout = 30;
  std::string tls_cert;
  std::string tls_key;
  std::string client_ca;
  bool version = false;
  std::string webhook_listen;
  std::string webhook_cert;
  std::string webhook_key;
  std::string scheduler_name(k8s::kDefaultSchedulerName);
  k8s::ClaimOptions claims;
  claims.ns = default_namespace();
  claims.holder = replica_name();
  app.add_option("--listen", listen, "HOST:PORT to serve on")->capture_default_str();
  app.add_option("--probe-listen", probe_listen,
                 "HOST:PORT of a second, plain-HTTP listener for the kubelet and Prometheus: "
                 "only GET /healthz, /readyz, /version and /metrics, with its own event loop and "
                 "connection slots (default: none)");
  app.add_option("--url-prefix", prefix, "path prefix of the extender verbs (urlPrefix's path)");
  app.add_option("--policy", policy_file, "policy YAML (default: built-in bundle policy)");
  app.add_option(
      "--cluster", cluster_file,
      "static inventory: NodeList (+ PodList) JSON/YAML (default: built-in demo cluster)");
  app.add_option("--kubeconfig", kubeconfig,
                 "watch a cluster through this kubeconfig (default: in-cluster config when "
                 "KUBERNETES_SERVICE_HOST is set and --cluster is not given)");
  app.add_option("--context", context, "kubeconfig context (default: current-context)");
  app.add_option("--check-policy", check_policy, "validate a policy file and exit");
  app.add_option("--max-body-bytes", max_body, "largest request body accepted")
      ->capture_default_str();
  app.add_option("--max-header-bytes", max_header_bytes,
                 "largest request head (request line and header fields); beyond, 431 and close")
      ->check(CLI::Range(1024, 64 * 1024 * 1024))
      ->capture_default_str();
  app.add_option("--max-headers", max_headers, "most header fields in one request")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  app.add_option("--max-answer-bytes", max_answer_bytes,
                 "largest answer; a larger one is replaced by an Error")
      ->check(CLI::Range(std::size_t{1}, std::size_t{1} << 40))
      ->capture_default_str();
  app.add_option("--probe-connections", probe_connections,
                 "connections kept above --max-connections(-per-peer) for /healthz, /readyz "
                 "and /metrics only")
      ->check(CLI::Range(0, 100000))
      ->capture_default_str();
  app.add_option("--deferred-timeout", deferred_timeout,
                 "seconds a deferred answer (bind) may take before the client gets an Error")
      ->check(CLI::Range(1, 86400))
      ->capture_default_str();
  app.add_option("--read-timeout", read_timeout,
                 "seconds to wait for the next byte of a request, or for the next request on a "
                 "kept connection")
      ->check(CLI::Range(1, 86400))
      ->capture_default_str();
  app.add_option("--write-timeout", write_timeout, "seconds one whole answer may take to write")
      ->check(CLI::Range(1, 86400))
      ->capture_default_str();
  app.add_option("--workers", workers, "threads answering requests")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  app.add_option("--bind-threads", bind_threads,
                 "threads that run binds (they mostly wait for the API server), so binds hold no "
                 "worker; 0: binds run on the workers")
      ->check(CLI::Range(0, 4096))
      ->capture_default_str();
  app.add_option("--max-queue", max_queue,
                 "connections that may wait for a busy worker; beyond, requests are answered at "
                 "once with an overload error")
      ->check(CLI::Range(0, 1000000))
      ->capture_default_str();
  app.add_option("--request-timeout", request_timeout,
                 "seconds a request's head and body may take from its first byte (HTTPS: also "
                 "the handshake, from the accept)")
      ->check(CLI::Range(1, 86400))
      ->capture_default_str();
  app.add_option("--max-connections", max_connections,
                 "open connections at most; beyond, new ones are closed at once")
      ->check(CLI::Range(1, 1000000))
      ->capture_default_str();
  app.add_option("--max-connections-per-peer", max_connections_per_peer,
                 "open connections from one peer address at most")
      ->check(CLI::Range(1, 1000000))
      ->capture_default_str();
  app.add_option("--tls-cert", tls_cert,
                 "serve HTTPS with this PEM certificate (chain); needs --tls-key");
  app.add_option("--tls-key", tls_key, "PEM private key of --tls-cert");
  app.add_option("--client-ca", client_ca,
                 "require client certificates verified by this PEM CA bundle (needs --tls-cert)");
  app.add_option("--webhook-listen", webhook_listen,
                 "HOST:PORT of the admission webhook's HTTPS listener (POST /mutate, /validate; "
                 "docs/admission-webhook.md), apart from --listen and --probe-listen (default: "
                 "none)");
  app.add_option("--webhook-tls-cert", webhook_cert,
                 "PEM certificate (chain) of --webhook-listen; re-read when the file changes");
  app.add_option("--webhook-tls-key", webhook_key, "PEM private key of --webhook-tls-cert");
  app.add_option("--claims-namespace", claims.ns,
                 "namespace of the claim ConfigMaps (default: $POD_NAMESPACE, else the "
                 "ServiceAccount's namespace, else gapless-system)")
      ->capture_default_str();
  app.add_option("--claim-objects", claims.objects,
                 "ConfigMaps the claims of all nodes share (claims made at once go in one write); "
                 "0: one per node. Every replica must use the same value")
      ->capture_default_str()
      ->check(CLI::Range(0, 64));
  app.add_option("--replica-name", claims.holder,
                 "this replica's name in claims, unique among replicas (default: $POD_NAME, else "
                 "the host name)")
      ->capture_default_str();
  app.add_option("--scheduler-name", scheduler_name,
                 "kube-scheduler profile whose pods Gapless schedules: those it finds no node for "
                 "wait for a drain target (Kubernetes mode)")
      ->check([](const std::string& s) { return s.empty() ? "must not be empty" : ""; })
      ->capture_default_str();
  std::string scheduler_lease;
  app.add_option("--scheduler-lease", scheduler_lease,
                 "NAMESPACE/NAME of kube-scheduler's leader lease: only while this replica's "
                 "kube-scheduler holds it are pods it parked on an extender error requeued and "
                 "movable pods evicted by consolidation (empty: every replica does both)")
      ->check([](const std::string& s) {
        const auto slash = s.find('/');
        return s.empty() || (slash != std::string::npos && slash > 0 && slash + 1 < s.size() &&
                             s.find('/', slash + 1) == std::string::npos)
                   ? ""
                   : "must be NAMESPACE/NAME";
      });
  double requeue_window = 60;
  app.add_option("--requeue-window", requeue_window,
                 "seconds after becoming ready during which pods kube-scheduler parked on an "
                 "extender error get the gapless.io/requeue annotation (0: never)")
      ->check(CLI::Range(0.0, 86400.0))
      ->capture_default_str();
  server::ConsolidatorOptions consolidation;
  double consolidation_window = 600;
  app.add_option("--consolidation-window", consolidation_window,
                 "seconds of the window --consolidation-max-moves counts evictions in (Kubernetes "
                 "mode, when the policy enables consolidation; docs/consolidation.md)")
      ->check(CLI::Range(1.0, 86400.0))
      ->capture_default_str();
  app.add_option("--consolidation-max-moves", consolidation.max_moves_per_window,
                 "evictions consolidation may make in any --consolidation-window, on top of the "
                 "policy's rateLimit (0: none)")
      ->capture_default_str();
  double pairing_wait = 20, pairing_timeout = 60;
  app.add_option("--pairing-wait", pairing_wait,
                 "seconds a bind may wait for a pod on its node with the same device request to "
                 "be allocated before it answers an Error and kube-scheduler retries (Kubernetes "
                 "mode; 0: binds never wait; keep below the extender's httpTimeout, 30 s in "
                 "manifests/scheduler-config.yaml)")
      ->check(CLI::Range(0.0, 3600.0))
      ->capture_default_str();
  app.add_option("--pairing-timeout", pairing_timeout,
                 "seconds a bound pod holds back binds alike on its node until its device plugin "
                 "marks it allocated; then it is given up on, logged and counted "
                 "(gapless_pairing_expired_total)")
      ->check(CLI::Range(1.0, 86400.0))
      ->capture_default_str();
  k8s::BindEvents bind_events;
  app.add_flag("--bound-events", bind_events.on_success,
               "post a Normal GaplessBound Event on each pod bound, naming its GPUs (at most 5 a "
               "second, bursts of 20; off: kube-scheduler's Scheduled Event and the pod's "
               "gapless.io/allocation annotation say the same, without another API request)");
  app.add_flag("--version", version, "print the version and exit");
  int wait_ready_seconds = -1;
  app.add_option(
         "--wait-ready", wait_ready_seconds,
         "wait up to SECONDS for the extender at --probe-listen (else --listen) to be ready, "
         "then exit 0 (1 if it is not): the Deployment's postStart hook, so kube-scheduler "
         "starts after it")
      ->check(CLI::Range(0, 3600));
  CLI11_PARSE(app, argc, argv);

  if (version) {
    std::printf("gapless-extender %s\n", GAPLESS_VERSION);
    return 0;
  }
  // The probe listener when there is one: plain HTTP even when --listen is HTTPS.
  if (wait_ready_seconds >= 0)
    return cmd::wait_ready(probe_listen.empty() ? listen : probe_listen, wait_ready_seconds);
  if (!check_policy.empty()) {
    auto p = policy::load_policy_file(check_policy);
    if (!p) {
      std::fprintf(stderr, "%s\n", p.error().c_str());
      return 1;
    }
    std::printf("%s: OK (%zu profiles, default \"%s\", %zu quotas)\n", check_policy.c_str(),
                p->profiles.size(), p->default_profile.c_str(), p->quotas.size());
    return 0;
  }

  placement::Policy policy = placement::builtin_policy();
  if (!policy_file.empty()) {
    auto p = policy::load_policy_file(policy_file);
    if (!p) {
      server::log_error("refusing to start: " + p.error());
      return 1;
    }
    policy = std::move(*p);
  }
  // Where the model comes from: a static file, the built-in demo, or a live cluster.
  const bool in_cluster = std::getenv("KUBERNETES_SERVICE_HOST") != nullptr;
  const bool kube_mode = cluster_file.empty() && (!kubeconfig.empty() || in_cluster);
  if (!kubeconfig.empty() && !cluster_file.empty()) {
    server::log_error("--cluster and --kubeconfig exclude each other");
    return 1;
  }
  std::unique_ptr<KubeSource> kube;
  model::Cluster cluster;
  std::vector<k8s::ParsedPod> file_pods;  // learned from at start (kube mode: the informer)
  std::string source;
  if (kube_mode) {
    auto config =
        kubeconfig.empty() ? k8s::in_cluster_config() : k8s::kubeconfig_config(kubeconfig, context);
    if (!config) {
      server::log_error("refusing to start: " + config.error());
      return 1;
    }
    source = "the Kubernetes API at " + config->server;
    k8s::RequeueOptions requeue;
    requeue.scheduler_name = scheduler_name;
    requeue.replica_name = claims.holder;
    if (const auto slash = scheduler_lease.find('/'); slash != std::string::npos) {
      requeue.lease_namespace = scheduler_lease.substr(0, slash);
      requeue.lease_name = scheduler_lease.substr(slash + 1);
    }
    requeue.window = std::chrono::milliseconds(static_cast<long long>(requeue_window * 1000));
    consolidation.window =
        std::chrono::milliseconds(static_cast<long long>(consolidation_window * 1000));
    kube = std::make_unique<KubeSource>(std::move(*config), claims, scheduler_name, requeue,
                                        bind_events, consolidation);
  } else {
    auto loaded = cluster_file.empty()
                      ? k8s::parse_cluster_file(gapless_demo_cluster(), "built-in demo cluster")
                      : k8s::load_cluster_file(cluster_file);
    if (!loaded) {
      server::log_error("refusing to start: " + loaded.error());
      return 1;
    }
    for (const std::string& w : loaded->warnings) server::log_warn(w);
    source = std::to_string(loaded->cluster.node_count()) + " nodes from " +
             (cluster_file.empty() ? std::string("the built-in demo cluster") : cluster_file);
    cluster = std::move(loaded->cluster);
    file_pods = std::move(loaded->pods);
  }
  std::string host;
  int port = 0;
  if (!cmd::split_listen(listen, &host, &port)) {
    server::log_error("--listen must be HOST:PORT, got \"" + listen + "\"");
    return 1;
  }
  std::string probe_host, webhook_host;
  int probe_port = 0, webhook_port = 0;
  if (!webhook_listen.empty() && !cmd::split_listen(webhook_listen, &webhook_host, &webhook_port)) {
    server::log_error("--webhook-listen must be HOST:PORT, got \"" + webhook_listen + "\"");
    return 1;
  }
  if (!probe_listen.empty() && !cmd::split_listen(probe_listen, &probe_host, &probe_port)) {
    server::log_error("--probe-listen must be HOST:PORT, got \"" + probe_listen + "\"");
    return 1;
  }

  // A peer closing a connection mid-write must not kill the process.
  std::signal(SIGPIPE, SIG_IGN);
  // Signals go to one thread that waits for them; every other thread has them blocked.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGHUP);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  server::Metrics metrics;
  server::InMemoryBinder memory_binder;
  k8s::Binder& binder = kube ? kube->binder() : static_cast<k8s::Binder&>(memory_binder);
  server::Extender extender(std::move(cluster), std::move(policy), binder, metrics);
  for (const k8s::ParsedPod& p : file_pods) extender.scheduler().observe(p.info, p.request);
  if (bind_threads > 0) extender.enable_bind_threads(bind_threads, kMaxQueuedBinds);
  // Prepares the cache for the shapes asked most, now and after every mix or policy change, so
  // first pods are not the ones paying for every node (docs/extender-flags-and-routes.md, /readyz).
  server::ScoreWarmer warmer(extender.scheduler(), [&extender] { return extender.ready(); });
  server::HttpOptions http_options;
  http_options.url_prefix = prefix;
  http_options.max_body_bytes = max_body;
  http_options.ready = [&extender, &warmer] { return extender.ready() && warmer.caught_up(); };
  http_options.read_timeout = std::chrono::seconds(read_timeout);
  http_options.write_timeout = std::chrono::seconds(write_timeout);
  http_options.workers = workers;
  http_options.max_queue = max_queue;
  http_options.request_timeout = std::chrono::seconds(request_timeout);
  http_options.max_connections = max_connections;
  http_options.max_connections_per_peer = max_connections_per_peer;
  http_options.max_header_bytes = max_header_bytes;
  http_options.max_headers = max_headers;
  http_options.max_answer_bytes = max_answer_bytes;
  http_options.probe_connections = probe_connections;
  http_options.deferred_timeout = std::chrono::seconds(deferred_timeout);
  // /bind goes through Extender::bind_async (src/server/routes.cpp, Routes::bind): a bind parked
  // behind the pairing gate holds no worker.
  http_options.tls_cert_file = tls_cert;
  http_options.tls_key_file = tls_key;
  http_options.client_ca_file = client_ca;
  http_options.metrics = &metrics;
  // Bound (and the TLS files loaded) before the cluster is watched: a bad flag or a busy port
  // fails the start at once.
  const door::DoorOptions http_options_copy = http_options;  // the webhook's bounds
  server::HttpServer http(extender, std::move(http_options));
  auto bound = http.bind(host, port);
  if (!bound) {
    server::log_error("refusing to start: " + bound.error());
    return 1;
  }
  if (!probe_listen.empty()) {
    auto probes = http.bind_probes(probe_host, probe_port);
    if (!probes) {
      server::log_error("refusing to start: --probe-listen: " + probes.error());
      return 1;
    }
    server::log_info("probes (/healthz, /readyz, /version, /metrics) on http://" + probe_host +
                     ":" + std::to_string(*probes));
  }
  std::optional<server::WebhookServer> webhook;
  if (!webhook_listen.empty()) {
    server::WebhookOptions o;
    static_cast<door::DoorOptions&>(o) = http_options_copy;
    o.tls_cert_file = webhook_cert;
    o.tls_key_file = webhook_key;
    o.client_ca_file.clear();
    o.scheduler_name = scheduler_name;
    if (kube) {
      o.product_labels = [&kube] {
        return kube->node_facts().label_values(std::string(k8s::kGpuProductLabel));
      };
    }
    webhook.emplace(extender, std::move(o));
    auto w = webhook->bind(webhook_host, webhook_port);
    if (!w) {
      server::log_error("refusing to start: --webhook-listen: " + w.error());
      return 1;
    }
    server::log_info("admission webhook (/mutate, /validate) on https://" + webhook_host + ":" +
                     std::to_string(*w));
  }
  if (kube && pairing_wait > 0) {
    using std::chrono::duration_cast;
    using std::chrono::milliseconds;
    using Seconds = std::chrono::duration<double>;
    extender.enable_pairing(
        server::PairingOptions{duration_cast<milliseconds>(Seconds(pairing_wait)),
                               duration_cast<milliseconds>(Seconds(pairing_timeout))});
  }
  if (kube) kube->start(extender, metrics);
  std::optional<server::PolicyWatch> watch;
  if (!policy_file.empty()) watch.emplace(extender, metrics, policy_file);

  std::thread signal_thread([&] {
    for (;;) {
      int sig = 0;
      if (sigwait(&signals, &sig) != 0) continue;
      if (sig == SIGHUP) {
        if (watch) watch->request_reload();  // the watcher reads the file, never this thread
        continue;
      }
      server::log_info("stopping on signal " + std::to_string(sig));
      extender.stop_binds();  // answers the binds waiting (gate, bind threads); running ones end
      http.stop();
      return;
    }
  });
  server::log_info("serving " + source + " on " + (http.tls() ? "https://" : "http://") + host +
                   ":" + std::to_string(*bound) + server::normalize_prefix(prefix) +
                   " (policy: " + extender.policy_source() +
                   (client_ca.empty() ? "" : "; client certificates required") + ")");
  if (webhook) webhook->start();
  http.serve();
  if (webhook) webhook->stop();
  if (signal_thread.joinable()) {
    // serve() also returns if the listener fails; wake the signal thread so it can exit.
    pthread_kill(signal_thread.native_handle(), SIGTERM);
    signal_thread.join();
  }
  if (kube) {
    // A quiet watch only notices stop() when it times out (minutes); everything Gapless knows
    // is in the API server, so there is nothing to flush: leave without waiting for it.
    server::log_info("stopped");
    std::_Exit(0);
  }
  return 0;
}
