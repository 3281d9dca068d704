// gapless-agent: the node agent (DaemonSet). Flags in, one Agent loop out; the work is in
// src/agent/.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <thread>
#include <vector>

#include "gapless/agent/agent.h"
#include "gapless/agent/device_plugin.h"
#include "gapless/agent/drift_monitor.h"
#include "gapless/agent/mig_reaper.h"
#include "gapless/agent/product_label.h"
#include "gapless/agent/status_server.h"
#include "gapless/agent/usage_report.h"
#include "gapless/k8s/node_inventory.h"

using namespace gapless;

namespace {

struct Options {
  agent::AgentOptions agent;
  bool once = false;
  bool print = false;
  std::string node_name;
  std::string kubeconfig;
  std::string context;
  std::string listen = "127.0.0.1:9400";
  double poll_seconds = 30;
  bool version = false;
  bool device_plugin = false;
  std::string device_plugin_dir = agent::kDevicePluginDir;
  int share_slots = 16;
  double mig_grace_seconds = 300;
  std::string pod_resources_socket = agent::kPodResourcesSocket;
  std::string proc_root = "/proc";  // per-pod usage (usage_report.h)
  bool no_usage = false;
  bool no_product_label = false;
};

std::atomic<bool> g_stop{false};
// SIGHUP: scan (and check drift) now. Agent::wake only stores to a lock-free atomic.
std::atomic<agent::Agent*> g_agent{nullptr};

void log_line(const std::string& line) {
  std::cerr << "gapless-agent: " << line << std::endl;
}

void add_flags(CLI::App& app, Options& o) {
  app.add_flag("--once", o.once, "scan and publish once, then exit");
  app.add_flag("--print", o.print,
               "with --once: print the annotation on stdout instead of publishing it");
  app.add_option("--nvml-library", o.agent.nvml_library, "NVML shared library to dlopen")
      ->capture_default_str();
  app.add_option("--node-name", o.node_name, "this node's name (default: $NODE_NAME)");
  app.add_option("--kubeconfig", o.kubeconfig, "kubeconfig file (default: in-cluster config)");
  app.add_option("--context", o.context, "kubeconfig context (default: current-context)");
  app.add_option("--listen", o.listen, "HOST:PORT for /healthz and /metrics")
      ->check(CLI::Validator(
          [](const std::string& v) {
            const auto colon = v.rfind(':');
            const bool ok = colon != std::string::npos && colon > 0 && colon + 1 < v.size() &&
                            v.find_first_not_of("0123456789", colon + 1) == std::string::npos;
            return ok ? std::string() : "must be HOST:PORT";
          },
          "HOST:PORT"))
      ->capture_default_str();
  app.add_option("--poll-interval", o.poll_seconds, "seconds between scans")
      ->check(CLI::Range(0.1, 86400.0))
      ->capture_default_str();
  app.add_flag("--device-plugin", o.device_plugin,
               "serve the kubelet device plugin: nvidia.com/gpu (replaces NVIDIA's plugin), "
               "gapless.io/gpu-shared-count and, on MIG-enabled GPUs, nvidia.com/mig-<profile>");
  app.add_option("--device-plugin-dir", o.device_plugin_dir,
                 "the kubelet's device plugin directory (kubelet.sock and the plugin sockets)")
      ->capture_default_str();
  app.add_option("--share-slots", o.share_slots,
                 "gapless.io/gpu-shared-count devices per GPU: the most share containers a GPU "
                 "takes; 0 serves no share resource")
      ->check(CLI::Range(0, 1000))
      ->capture_default_str();
  app.add_option("--mig-grace-period", o.mig_grace_seconds,
                 "seconds a MIG instance the agent created stays after no pod uses it, before "
                 "it is destroyed (a replacement pod reuses it meanwhile)")
      ->check(CLI::Range(0.0, 86400.0 * 30))
      ->capture_default_str();
  app.add_option("--pod-resources-socket", o.pod_resources_socket,
                 "the kubelet's PodResources socket (<kubelet root>/pod-resources/kubelet.sock): "
                 "with --device-plugin, every scan compares the devices the kubelet assigned "
                 "with the pods' allocation records (docs/node-drift.md)")
      ->capture_default_str();
  app.add_option("--proc-root", o.proc_root,
                 "where the host's /proc is mounted: each GPU process's cgroup there names its "
                 "pod (per-pod GPU usage)")
      ->capture_default_str();
  app.add_flag("--no-usage", o.no_usage,
               "do not read per-GPU and per-pod usage (utilization, memory, share over-use)");
  app.add_flag("--no-product-label", o.no_product_label,
               "do not label the Node nvidia.com/gpu.product (written only where GPU Feature "
               "Discovery has not set it)");
  app.add_flag("--version", o.version, "print the version and exit (after checking the flags)");
}

// --once --print: the annotation on stdout; without NVML a message and exit 0 (contract).
int print_once(agent::Agent& a) {
  if (!a.load_nvml()) return 0;  // the agent said why on stderr
  auto text = a.tick();
  if (!text.ok()) {
    log_line(text.error());
    return 1;
  }
  std::cout << *text << std::endl;
  return 0;
}

std::unique_ptr<k8s::ApiClient> api_client(const Options& o) {
  auto config = o.kubeconfig.empty() ? k8s::in_cluster_config()
                                     : k8s::kubeconfig_config(o.kubeconfig, o.context);
  if (!config.ok()) {
    log_line("no Kubernetes API: " + config.error());
    return nullptr;
  }
  return std::make_unique<k8s::ApiClient>(std::move(config).value());
}

// MIG instance management for the MIG resources, with its own NVML session (NVML counts its
// sessions); null when NVML or its MIG calls are missing, or no GPU is MIG-enabled.
struct Mig {
  std::unique_ptr<agent::NvmlLibrary> nvml;
  std::unique_ptr<agent::MigInstances> instances;
  std::vector<std::string> resources;
};

std::unique_ptr<Mig> mig_management(const Options& o) {
  if (!o.device_plugin) return nullptr;
  auto lib = agent::NvmlLibrary::open(o.agent.nvml_library);
  if (!lib.ok()) return nullptr;  // the agent says why
  auto m = std::make_unique<Mig>();
  m->nvml = std::move(lib).value();
  m->resources = agent::mig_resources(*m->nvml);
  if (m->resources.empty()) return nullptr;
  m->instances = std::make_unique<agent::MigInstances>(
      *m->nvml, o.device_plugin_dir + "/gapless/mig-instances.json");
  if (!m->instances->supported()) {
    log_line("MIG-enabled GPUs, but this NVML cannot create MIG instances: no MIG resources");
    return nullptr;
  }
  if (Status s = m->instances->load(); !s.ok()) {
    log_line("MIG: " + s.error() + "; no instance counts as created by the agent");
  }
  return m;
}

// The device plugins, fed by the agent's scans; none without --device-plugin.
std::vector<std::unique_ptr<agent::DevicePlugin>> device_plugins(const Options& o,
                                                                 k8s::ApiTransport& api, Mig* mig) {
  std::vector<std::unique_ptr<agent::DevicePlugin>> plugins;
  if (!o.device_plugin) return plugins;
  agent::DevicePluginOptions whole;
  whole.plugin_dir = o.device_plugin_dir;
  whole.node_name = o.node_name;
  // Announce the registration (gapless.io/device-plugin) at once rather than at the next poll.
  whole.on_registered = [] {
    if (agent::Agent* running = g_agent.load()) running->wake();
  };
  plugins.push_back(std::make_unique<agent::DevicePlugin>(whole, api, log_line));
  if (o.share_slots > 0) {
    agent::DevicePluginOptions shared = whole;
    shared.resource = agent::kSharedGpuResource;
    shared.share_slots = o.share_slots;
    plugins.push_back(std::make_unique<agent::DevicePlugin>(shared, api, log_line));
  }
  for (const auto& resource : mig != nullptr ? mig->resources : std::vector<std::string>{}) {
    agent::DevicePluginOptions m = whole;
    m.resource = resource;
    m.mig = mig->instances.get();
    plugins.push_back(std::make_unique<agent::DevicePlugin>(m, api, log_line));
  }
  return plugins;
}

// Sweeps every tenth of the grace period (1 s to 30 s) until stop.
void reap_mig(agent::MigInstances& instances, k8s::ApiTransport& api, const Options& o) {
  const auto grace = std::chrono::seconds(static_cast<long long>(o.mig_grace_seconds));
  agent::MigReaper reaper(instances, api, o.node_name, grace, log_line);
  const auto every = std::clamp<std::chrono::milliseconds>(
      std::chrono::duration_cast<std::chrono::milliseconds>(grace) / 10, std::chrono::seconds(1),
      std::chrono::seconds(30));
  while (!g_stop) {
    auto swept = reaper.sweep(agent::MigReaper::Clock::now());
    if (!swept.ok()) log_line("MIG: " + swept.error());
    const auto next = std::chrono::steady_clock::now() + every;
    while (!g_stop && std::chrono::steady_clock::now() < next) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  }
}

int publish(const Options& o) {
  auto api = api_client(o);
  if (api == nullptr) return 1;
  agent::NodePublisher publisher(*api, o.node_name);
  agent::AgentMetrics metrics;
  agent::Agent a(o.agent, &publisher, metrics, log_line);
  if (o.once) {
    if (!a.load_nvml()) return 0;
    auto t = a.tick();
    if (!t.ok()) log_line(t.error());
    return t.ok() ? 0 : 1;
  }
  // Before the status server: /metrics reads what it collects from the first request on, and it
  // must outlive the server (declared first, destroyed last).
  agent::UsageReporter usage({o.node_name, o.proc_root}, api.get(), log_line);
  if (!o.no_usage) metrics.also_serve(&usage);
  agent::StatusServer status(metrics);
  if (Status s = status.start(o.listen); !s.ok()) {
    log_line(s.error());
    return 1;
  }
  auto mig = mig_management(o);
  auto plugins = device_plugins(o, *api, mig.get());
  for (auto& p : plugins) {
    if (Status s = p->start(); !s.ok()) {
      log_line(s.error());
      return 1;
    }
  }
  // gapless.io/device-plugin: which resources this node's kubelet gets from Gapless's plugin,
  // so the extender gates binds here only (docs/node-pairing.md). Without --device-plugin the
  // first call removes a value an earlier run left.
  agent::NodePublisher plugin_mark(*api, o.node_name, std::string(k8s::kDevicePluginAnnotation));
  auto announce_plugins = [&] {
    const std::string resources = agent::registered_resources(plugins);
    auto sent = plugin_mark.publish(resources);
    if (!sent.ok()) return log_line("gapless.io/device-plugin: " + sent.error());
    if (*sent) log_line("gapless.io/device-plugin: " + (resources.empty() ? "removed" : resources));
  };
  if (plugins.empty()) announce_plugins();  // plugins announce once registered
  a.on_tick([&](const agent::NvmlLibrary& nvml) {
    if (!o.no_usage) {
      if (Status s = usage.update(nvml); !s.ok()) log_line("usage: " + s.error());
    }
    announce_plugins();
  });
  // nvidia.com/gpu.product where GPU Feature Discovery does not set it (product_label.h).
  agent::ProductLabeler product(*api, o.node_name);
  a.on_scan([&](const agent::NodeGpus& node) {
    for (auto& p : plugins) p->set_gpus(node.gpus);
    if (o.no_product_label) return;
    auto sent = product.publish(agent::product_label_value(node.gpus));
    if (!sent.ok()) log_line(std::string(agent::kProductLabel) + ": " + sent.error());
  });
  // The drift check runs with the device plugin: it compares what the plugin's kubelet did.
  std::unique_ptr<agent::DriftMonitor> drift;
  if (o.device_plugin) {
    drift = std::make_unique<agent::DriftMonitor>(
        agent::DriftMonitorOptions{o.node_name, o.pod_resources_socket}, *api, metrics, log_line);
    a.check_in_use([&drift](const agent::NodeGpus& node) {
      std::map<int, std::string> uuids;
      for (const auto& g : node.gpus) uuids[g.index] = g.uuid;
      auto fences = drift->check(uuids);
      return fences.ok() ? *fences : drift->fences();
    });
  }
  std::thread reaper;
  if (mig) {
    agent::MigInstances* instances = mig->instances.get();
    a.hide_mig_instances([instances](const agent::GpuState& g, const model::MigInstance& i) {
      return instances->created(g.uuid, i.start);
    });
    reaper = std::thread([instances, &api, &o] { reap_mig(*instances, *api, o); });
  }
  std::signal(SIGTERM, [](int) { g_stop = true; });
  std::signal(SIGINT, [](int) { g_stop = true; });
  g_agent = &a;
  std::signal(SIGHUP, [](int) {
    if (agent::Agent* running = g_agent.load()) running->wake();
  });
  log_line("node " + o.node_name + ", /healthz and /metrics on " + o.listen +
           (plugins.empty() ? "" : ", device plugin in " + o.device_plugin_dir));
  a.run(g_stop);
  std::signal(SIGHUP, SIG_IGN);
  g_agent = nullptr;
  if (reaper.joinable()) reaper.join();
  // Stopped plugins first (the kubelet then marks their devices unhealthy), then the
  // announcement: the extender stops gating this node's binds.
  for (auto& p : plugins) p->stop();
  plugins.clear();
  announce_plugins();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"gapless-agent: publishes this node's GPU topology (gapless.io/gpu-topology)"};
  Options o;
  add_flags(app, o);
  CLI11_PARSE(app, argc, argv);
  if (o.version) {
    std::cout << "gapless-agent " GAPLESS_VERSION << std::endl;
    return 0;
  }
  o.agent.poll_interval = std::chrono::milliseconds(static_cast<long long>(o.poll_seconds * 1000));
  if (o.print && !o.once) {
    log_line("--print needs --once");
    return 2;
  }
  if (o.print) {
    agent::AgentMetrics metrics;
    agent::Agent a(o.agent, nullptr, metrics, log_line);
    return print_once(a);
  }
  if (o.node_name.empty()) {
    const char* env = std::getenv("NODE_NAME");
    o.node_name = env != nullptr ? env : "";
  }
  if (o.node_name.empty()) {
    log_line("no node name: set --node-name or NODE_NAME (the downward API's spec.nodeName)");
    return 2;
  }
  o.agent.node_label = o.node_name;
  return publish(o);
}
