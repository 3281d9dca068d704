#include "deployed.h"

#include <httplib.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "gapless/k8s/node_inventory.h"
#include "gapless/k8s/pod_request.h"
#include "gapless/placement/scheduler.h"
#include "rng.h"

namespace gapless::bench {

using nlohmann::json;

// ---- the configuration ------------------------------------------------------------------------

namespace {

// kube-scheduler v1.26's default score plugins and weights (apis/config/v1/default_plugins.go)
// that the emulation models; the rest are constant on the trace (see deployed.h).
void apply_score_list(const YAML::Node& list, bool enable, SchedulerConfig* c) {
  if (!list || !list.IsSequence()) return;
  for (const YAML::Node& p : list) {
    const std::string name = p["name"] ? p["name"].as<std::string>() : "";
    const int weight = enable && p["weight"] ? p["weight"].as<int>() : 1;
    if (name == "*" && !enable) c->fit_weight = c->balanced_weight = 0;
    if (name == "NodeResourcesFit") c->fit_weight = enable ? weight : 0;
    if (name == "NodeResourcesBalancedAllocation") c->balanced_weight = enable ? weight : 0;
  }
}

void read_fit_args(const YAML::Node& args, SchedulerConfig* c) {
  const YAML::Node strategy = args["scoringStrategy"];
  if (!strategy) return;
  if (strategy["type"]) c->most_allocated = strategy["type"].as<std::string>() == "MostAllocated";
  if (const YAML::Node res = strategy["resources"]; res && res.IsSequence()) {
    c->fit_cpu_weight = c->fit_memory_weight = 0;
    for (const YAML::Node& r : res) {
      const std::string name = r["name"].as<std::string>();
      const std::int64_t w = r["weight"] ? r["weight"].as<std::int64_t>() : 1;
      if (name == "cpu") c->fit_cpu_weight = w;
      if (name == "memory") c->fit_memory_weight = w;
    }
  }
}

}  // namespace

Result<SchedulerConfig> parse_scheduler_config(const std::string& text, const std::string& source) {
  SchedulerConfig c;
  c.source = source;
  try {
    const YAML::Node doc = YAML::Load(text);
    if (!doc.IsMap() || !doc["kind"] ||
        doc["kind"].as<std::string>() != "KubeSchedulerConfiguration") {
      return Error{source + ": not a KubeSchedulerConfiguration"};
    }
    if (doc["percentageOfNodesToScore"]) {
      c.percentage_of_nodes_to_score = doc["percentageOfNodesToScore"].as<int>();
    }
    if (const YAML::Node profiles = doc["profiles"];
        profiles && profiles.IsSequence() && profiles.size() > 0) {
      const YAML::Node plugins = profiles[0]["plugins"];
      for (const char* point : {"multiPoint", "score"}) {
        if (!plugins || !plugins[point]) continue;
        apply_score_list(plugins[point]["disabled"], false, &c);
        apply_score_list(plugins[point]["enabled"], true, &c);
      }
      if (const YAML::Node pc = profiles[0]["pluginConfig"]; pc && pc.IsSequence()) {
        for (const YAML::Node& p : pc) {
          if (p["name"] && p["name"].as<std::string>() == "NodeResourcesFit" && p["args"]) {
            read_fit_args(p["args"], &c);
          }
        }
      }
    }
    if (const YAML::Node ext = doc["extenders"]; ext && ext.IsSequence() && ext.size() > 0) {
      const YAML::Node e = ext[0];
      c.has_extender = true;
      c.filter_verb = e["filterVerb"] && !e["filterVerb"].as<std::string>().empty();
      c.prioritize_verb = e["prioritizeVerb"] && !e["prioritizeVerb"].as<std::string>().empty();
      c.bind_verb = e["bindVerb"] && !e["bindVerb"].as<std::string>().empty();
      c.weight = e["weight"] ? e["weight"].as<std::int64_t>() : 0;
      if (const YAML::Node m = e["managedResources"]; m && m.IsSequence()) {
        for (const YAML::Node& r : m) c.managed.push_back(r["name"].as<std::string>());
      }
      if (c.prioritize_verb && c.weight <= 0) {
        return Error{source + ": extenders[0]: prioritizeVerb needs a positive weight"};
      }
    }
  } catch (const YAML::Exception& e) {
    return Error{source + ": " + e.what()};
  }
  return c;
}

Result<SchedulerConfig> load_scheduler_config(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Error{"cannot read scheduler config " + path};
  std::ostringstream text;
  text << in.rdbuf();
  return parse_scheduler_config(text.str(), path);
}

// ---- Kubernetes objects of the trace ----------------------------------------------------------

namespace {

json node_object(const model::Node& n) {
  const std::string model = n.gpus.empty() ? "" : n.gpus[0].model;
  json labels = {{"kubernetes.io/hostname", n.name}};
  if (!n.gpus.empty()) {
    labels["nvidia.com/gpu.product"] = model;
    labels["nvidia.com/gpu.count"] = std::to_string(n.gpus.size());
  }
  return {{"metadata", {{"name", n.name}, {"labels", labels}}},
          {"status",
           {{"allocatable",
             {{"cpu", std::to_string(n.host.cpu_milli) + "m"},
              {"memory", std::to_string(n.host.memory_mib) + "Mi"},
              {"nvidia.com/gpu", std::to_string(n.gpus.size())}}}}}};
}

}  // namespace

std::string cluster_file_json(const std::vector<model::Node>& nodes) {
  json items = json::array();
  for (const model::Node& n : nodes) items.push_back(node_object(n));
  return json{{"apiVersion", "v1"}, {"kind", "NodeList"}, {"items", items}}.dump();
}

std::string pod_json(const TracePod& p, const std::string& uid) {
  json limits = {{"cpu", std::to_string(p.cpu_milli) + "m"},
                 {"memory", std::to_string(p.memory_mib) + "Mi"}};
  if (p.num_gpu == 1 && p.gpu_milli < model::kFullComputeMilli) {
    limits["gapless.io/gpu-compute"] = std::to_string(p.gpu_milli);
  } else if (p.num_gpu > 0) {
    limits["nvidia.com/gpu"] = std::to_string(p.num_gpu);
  }
  json annotations = json::object();
  std::string models;
  for (const std::string& m : p.gpu_spec) models += (models.empty() ? "" : ",") + m;
  if (!models.empty()) annotations["gapless.io/gpu-models"] = models;
  return json{
      {"metadata",
       {{"name", uid}, {"namespace", "trace"}, {"uid", uid}, {"annotations", annotations}}},
      {"spec",
       {{"containers", json::array({{{"name", "c"}, {"resources", {{"limits", limits}}}}})}}}}
      .dump();
}

// ---- the extender, in-process or over HTTP ----------------------------------------------------

namespace {

// The extender's model is built from the same Node objects gapless-extender --cluster reads,
// and every pod is parsed from the JSON the HTTP mode sends: both see the same cluster.
class InProcess : public ExtenderPort {
 public:
  InProcess(const std::vector<model::Node>& nodes, const PolicySetup& policy)
      : sched_(model_of(nodes), policy_of(policy), options()), loaded_(sched_.policy()) {}

  bool filter(const TracePod& pod, const std::string& uid, const std::vector<std::string>& nodes,
              std::vector<std::string>* passed) override {
    const k8s::ParsedPod& p = parsed(pod, uid);
    sched_.observe(p.info, p.request);
    *passed = sched_.filter(*loaded_, p.info, p.request, profile(), nodes).passed;
    // As the extender's filter does; a pod filtered once and dropped never holds a node.
    if (passed->empty()) sched_.wait(p.info, p.request, profile());
    return true;
  }
  bool prioritize(const TracePod& pod, const std::string& uid,
                  const std::vector<std::string>& nodes, std::vector<int>* scores) override {
    const k8s::ParsedPod& p = parsed(pod, uid);
    sched_.observe(p.info, p.request);
    *scores =
        placement::Scheduler::normalize(nodes, sched_.score(*loaded_, p.request, profile(), nodes));
    return true;
  }
  bool bind(const TracePod& pod, const std::string& uid, const std::string& node,
            std::int64_t* granted) override {
    const k8s::ParsedPod& p = parsed(pod, uid);
    auto a = sched_.reserve(p.info, p.request, profile(), node);
    if (!a) return false;
    *granted = granted_milli(*a);
    return true;
  }
  void bound_elsewhere(const TracePod& pod, const std::string& uid,
                       const std::string& node) override {
    const k8s::ParsedPod& p = parsed(pod, uid);
    sched_.observe(p.info, p.request);  // the pod informer sees every pod
    model::Allocation a;
    a.pod_uid = uid;
    a.pod_ns = p.info.ns;
    a.pod_name = p.info.name;
    a.node = node;
    a.host = p.request.host;
    sched_.mutate([&](model::Cluster& c) { (void)c.restore(a); });
  }

 private:
  static model::Cluster model_of(const std::vector<model::Node>& nodes) {
    model::Cluster c;
    for (const model::Node& n : nodes) {
      auto node = k8s::node_from_json(node_object(n));
      if (node) c.upsert_node(std::move(*node));
    }
    return c;
  }
  static placement::SchedulerOptions options() {
    placement::SchedulerOptions o;
    o.check_host = false;  // as gapless-extender: kube-scheduler checked CPU and memory
    o.cache_shapes = 256;
    return o;
  }
  const placement::Profile& profile() const { return loaded_->policy.profiles.front(); }
  const k8s::ParsedPod& parsed(const TracePod& pod, const std::string& uid) {
    if (uid != last_uid_) {
      auto p = k8s::parse_pod(json::parse(pod_json(pod, uid)));
      last_ = p ? std::move(*p) : k8s::ParsedPod{};
      last_uid_ = uid;
    }
    return last_;
  }

  placement::Scheduler sched_;
  std::shared_ptr<const placement::LoadedPolicy> loaded_;
  std::string last_uid_;
  k8s::ParsedPod last_;
};

class OverHttp : public ExtenderPort {
 public:
  explicit OverHttp(const std::string& url) {
    // http://host:port[/prefix]
    const std::size_t slash = url.find('/', url.find("://") + 3);
    base_ = url.substr(0, slash);
    prefix_ = slash == std::string::npos ? "" : url.substr(slash);
    while (!prefix_.empty() && prefix_.back() == '/') prefix_.pop_back();
    client_ = std::make_unique<httplib::Client>(base_);
    client_->set_keep_alive(true);
    client_->set_read_timeout(30, 0);
  }
  bool filter(const TracePod& pod, const std::string& uid, const std::vector<std::string>& nodes,
              std::vector<std::string>* passed) override {
    json r;
    if (!post("/filter", args(pod, uid, nodes), &r) || r.value("Error", "") != "") return false;
    passed->clear();
    if (r["NodeNames"].is_array()) {
      for (const json& n : r["NodeNames"]) passed->push_back(n.get<std::string>());
    }
    return true;
  }
  bool prioritize(const TracePod& pod, const std::string& uid,
                  const std::vector<std::string>& nodes, std::vector<int>* scores) override {
    json r;
    if (!post("/prioritize", args(pod, uid, nodes), &r) || !r.is_array()) return false;
    std::map<std::string, int> by;
    for (const json& h : r) by[h.at("Host").get<std::string>()] = h.at("Score").get<int>();
    scores->clear();
    for (const std::string& n : nodes) scores->push_back(by.count(n) ? by[n] : 0);
    return true;
  }
  bool bind(const TracePod& pod, const std::string& uid, const std::string& node,
            std::int64_t* granted) override {
    json r;
    const std::string body =
        json{{"PodName", uid}, {"PodNamespace", "trace"}, {"PodUID", uid}, {"Node", node}}.dump();
    if (!post("/bind", body, &r) || r.value("Error", "x") != "") return false;
    // The grant is what the pod asked: the extender binds exactly that or refuses.
    *granted = pod.gpu_request();
    return true;
  }
  void bound_elsewhere(const TracePod&, const std::string&, const std::string&) override {
    // A --cluster extender has no pod informer: it never learns of pods it did not bind.
  }

 private:
  std::string args(const TracePod& pod, const std::string& uid,
                   const std::vector<std::string>& nodes) const {
    return "{\"Pod\":" + pod_json(pod, uid) +
           ",\"Nodes\":null,\"NodeNames\":" + json(nodes).dump() + "}";
  }
  bool post(const std::string& verb, const std::string& body, json* out) {
    auto res = client_->Post(prefix_ + verb, body, "application/json");
    if (!res || res->status != 200) return false;
    *out = json::parse(res->body, nullptr, false);
    return !out->is_discarded();
  }
  std::string base_, prefix_;
  std::unique_ptr<httplib::Client> client_;
};

}  // namespace

std::unique_ptr<ExtenderPort> in_process_extender(const std::vector<model::Node>& nodes,
                                                  const PolicySetup& policy) {
  return std::make_unique<InProcess>(nodes, policy);
}

std::unique_ptr<ExtenderPort> http_extender(const std::string& url) {
  return std::make_unique<OverHttp>(url);
}

// ---- the emulated kube-scheduler --------------------------------------------------------------

namespace {

// What kube-scheduler's cache holds per node: requested CPU and memory, actual and "non-zero"
// (a pod without a request counts 100m CPU and 200 MiB for scoring: schedutil.GetNonzeroRequests).
struct NodeRequests {
  std::int64_t cpu = 0, memory = 0, cpu_nz = 0, memory_nz = 0;
};
constexpr std::int64_t kDefaultCpuMilli = 100;
constexpr std::int64_t kDefaultMemoryMiB = 200;

std::int64_t least_allocated(std::int64_t requested, std::int64_t capacity) {
  if (capacity == 0 || requested > capacity) return 0;
  return (capacity - requested) * 100 / capacity;
}
std::int64_t most_allocated(std::int64_t requested, std::int64_t capacity) {
  if (capacity == 0) return 0;
  return std::min(requested, capacity) * 100 / capacity;
}

// The in-tree score plugins the configuration enables, summed with their weights.
std::int64_t plugin_score(const SchedulerConfig& c, const model::Node& n, const NodeRequests& r,
                          const TracePod& p) {
  std::int64_t total = 0;
  if (c.fit_weight > 0) {
    const std::int64_t cpu = r.cpu_nz + std::max(p.cpu_milli, kDefaultCpuMilli);
    const std::int64_t mem = r.memory_nz + (p.memory_mib > 0 ? p.memory_mib : kDefaultMemoryMiB);
    auto one = c.most_allocated ? most_allocated : least_allocated;
    const std::int64_t weights = c.fit_cpu_weight + c.fit_memory_weight;
    if (weights > 0) {
      total += c.fit_weight *
               (one(cpu, n.host.cpu_milli) * c.fit_cpu_weight +
                one(mem, n.host.memory_mib) * c.fit_memory_weight) /
               weights;
    }
  }
  if (c.balanced_weight > 0) {
    auto fraction = [](std::int64_t req, std::int64_t cap) {
      return cap == 0 ? 0.0 : std::min(1.0, static_cast<double>(req) / static_cast<double>(cap));
    };
    const double fc = fraction(r.cpu + p.cpu_milli, n.host.cpu_milli);
    const double fm = fraction(r.memory + p.memory_mib, n.host.memory_mib);
    const double sd = std::abs(fc - fm) / 2;  // the standard deviation of two fractions
    total += c.balanced_weight * static_cast<std::int64_t>((1 - sd) * 100);
  }
  return total;
}

bool interested(const SchedulerConfig& c, const TracePod& p) {
  if (c.managed.empty()) return true;
  const bool share = p.num_gpu == 1 && p.gpu_milli < model::kFullComputeMilli;
  const std::string asked = p.num_gpu == 0 ? ""
                            : share        ? "gapless.io/gpu-compute"
                                           : "nvidia.com/gpu";
  return !asked.empty() && std::find(c.managed.begin(), c.managed.end(), asked) != c.managed.end();
}

}  // namespace

RunResult replay_deployed(const std::vector<model::Node>& nodes, const Workload& w,
                          const Arrivals& a, const SchedulerConfig& config, ExtenderPort& extender,
                          std::uint64_t seed) {
  const auto start = std::chrono::steady_clock::now();
  Rng pick(seed ^ 0xdeb1045eedULL);
  std::vector<NodeRequests> requested(nodes.size());
  std::map<std::string, std::size_t> index;
  for (std::size_t i = 0; i < nodes.size(); ++i) index[nodes[i].name] = i;
  RunResult out;
  out.events.reserve(a.order.size());
  std::int64_t arrived = 0, used = 0;
  std::vector<std::string> feasible;
  std::vector<std::int64_t> total;
  for (std::size_t step = 0; step < a.order.size(); ++step) {
    const TracePod& pod = w.pods[a.order[step]];
    const std::string uid = "pod-" + std::to_string(step);
    arrived += pod.gpu_request();
    // Filter: NodeResourcesFit on CPU and memory, then the extender.
    feasible.clear();
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      if (requested[i].cpu + pod.cpu_milli <= nodes[i].host.cpu_milli &&
          requested[i].memory + pod.memory_mib <= nodes[i].host.memory_mib) {
        feasible.push_back(nodes[i].name);
      }
    }
    const bool ours = config.has_extender && interested(config, pod);
    bool ok = true;
    if (ours && config.filter_verb && !feasible.empty()) {
      std::vector<std::string> passed;
      ok = extender.filter(pod, uid, feasible, &passed);
      feasible = std::move(passed);
    }
    std::string chosen;
    if (ok && feasible.size() == 1) {
      chosen = feasible[0];
    } else if (ok && !feasible.empty()) {
      total.assign(feasible.size(), 0);
      for (std::size_t k = 0; k < feasible.size(); ++k) {
        const std::size_t i = index[feasible[k]];
        total[k] = plugin_score(config, nodes[i], requested[i], pod);
      }
      std::vector<int> ext;
      if (ours && config.prioritize_verb && extender.prioritize(pod, uid, feasible, &ext)) {
        for (std::size_t k = 0; k < feasible.size(); ++k) total[k] += ext[k] * config.weight * 10;
      }
      // selectHost: reservoir sampling over the highest totals.
      std::int64_t best = -1;
      std::uint64_t ties = 0;
      for (std::size_t k = 0; k < feasible.size(); ++k) {
        if (total[k] > best) {
          best = total[k];
          ties = 1;
          chosen = feasible[k];
        } else if (total[k] == best && pick.below(++ties) == 0) {
          chosen = feasible[k];
        }
      }
    }
    std::int64_t granted = 0;
    if (!chosen.empty() && ours && config.bind_verb) {
      if (!extender.bind(pod, uid, chosen, &granted)) chosen.clear();
    } else if (!chosen.empty()) {
      extender.bound_elsewhere(pod, uid, chosen);
    }
    if (chosen.empty()) {
      ++out.failed;
    } else {
      ++out.placed;
      used += granted;
      NodeRequests& r = requested[index[chosen]];
      r.cpu += pod.cpu_milli;
      r.memory += pod.memory_mib;
      r.cpu_nz += std::max(pod.cpu_milli, kDefaultCpuMilli);
      r.memory_nz += pod.memory_mib > 0 ? pod.memory_mib : kDefaultMemoryMiB;
    }
    out.events.push_back({arrived, used, 0.0});
  }
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

}  // namespace gapless::bench
