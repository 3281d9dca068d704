#include "deployed.h"

#include <httplib.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "gapless/k8s/model_pin.h"
#include "gapless/k8s/node_inventory.h"
#include "gapless/k8s/pod_movability.h"
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
      if (profiles[0]["percentageOfNodesToScore"]) {  // a profile's own (v1.26) comes first
        c.percentage_of_nodes_to_score = profiles[0]["percentageOfNodesToScore"].as<int>();
      }
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

std::string pod_json(const TracePod& p, const std::string& uid, bool movable) {
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
  json meta = {{"name", uid}, {"namespace", "trace"}, {"uid", uid}, {"annotations", annotations}};
  if (movable) {  // k8s::pod_movability: opted in, and a controller that recreates the pod
    meta["annotations"][k8s::kMovableAnnotation] = "true";
    meta["ownerReferences"] = json::array({{{"apiVersion", "apps/v1"},
                                            {"kind", "ReplicaSet"},
                                            {"name", "trace"},
                                            {"uid", "trace-rs"},
                                            {"controller", true}}});
  }
  return json{
      {"metadata", meta},
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
  void deleted(const std::string& uid) override {
    // As the pod informer's delete: the allocation goes, then the UID (its wait with it).
    sched_.release(uid);
    sched_.forget(uid);
  }
  void unschedulable(const TracePod& pod, const std::string& uid) override {
    const k8s::ParsedPod& p = parsed(pod, uid);
    sched_.observe(p.info, p.request);  // the informer sees the pod, filtered or not
    sched_.wait(p.info, p.request, profile(), 0, placement::Scheduler::WaitSource::kUnschedulable);
  }
  // As server::Consolidator::consolidate_for, less what needs the API server (PodDisruptionBudgets,
  // the Eviction API's dry runs, the API call rate): the engine's plan, the room held before the
  // evictions, the moves counted.
  std::vector<Eviction> consolidate(
      const TracePod& pod, const std::string& uid, double t,
      const std::function<double(const std::string&)>& started_at) override {
    const k8s::ParsedPod& p = parsed(pod, uid);
    const placement::ConsolidationSearch search =
        sched_.consolidate(p.info, p.request, profile(), t, {},
                           [&](const model::Allocation& a) { return started_at(a.pod_uid); });
    if (search.fits_now || !search.plan || loaded_->policy.consolidation.dry_run) return {};
    sched_.hold_room(p.info, *search.plan, t);
    sched_.moves_made(*search.plan, t);
    std::vector<Eviction> out;
    for (const placement::PlannedMove& m : search.plan->moves) out.push_back({m.pod_uid, m.from});
    return out;
  }
  void tick(double t) override { sched_.expire_holds(t); }

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
      auto p = k8s::parse_pod(json::parse(pod_json(pod, uid, movable(uid))));
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
    client_->set_tcp_nodelay(true);  // as Go's net/http (kube-scheduler): no 40 ms Nagle stalls
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
  // A --cluster extender has no pod informer: it never learns of pods it did not bind, of pods
  // that leave, or of their conditions.
  void bound_elsewhere(const TracePod&, const std::string&, const std::string&) override {}
  void deleted(const std::string&) override {}
  void unschedulable(const TracePod&, const std::string&) override {}

 private:
  std::string args(const TracePod& pod, const std::string& uid,
                   const std::vector<std::string>& nodes) const {
    return "{\"Pod\":" + pod_json(pod, uid, movable(uid)) +
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

bool is_share(const TracePod& p) {
  return p.num_gpu == 1 && p.gpu_milli < model::kFullComputeMilli;
}

// The pod's nvidia.com/gpu request as pod_json writes it: whole GPUs only. A share asks
// gapless.io/gpu-compute, which the shipped configuration's ignoredResourceGroups leaves out.
std::int64_t nvidia_gpus(const TracePod& p) {
  return is_share(p) ? 0 : p.num_gpu;
}

// The in-tree score plugins the configuration enables, summed with their weights.
std::int64_t plugin_score(const SchedulerConfig& c, const model::Node& n, std::int64_t cpu_nz,
                          std::int64_t memory_nz, std::int64_t cpu, std::int64_t memory,
                          const TracePod& p) {
  std::int64_t total = 0;
  if (c.fit_weight > 0) {
    const std::int64_t pc = cpu_nz + std::max(p.cpu_milli, kDefaultCpuMilli);
    const std::int64_t pm = memory_nz + (p.memory_mib > 0 ? p.memory_mib : kDefaultMemoryMiB);
    auto one = c.most_allocated ? most_allocated : least_allocated;
    const std::int64_t weights = c.fit_cpu_weight + c.fit_memory_weight;
    if (weights > 0) {
      total += c.fit_weight *
               (one(pc, n.host.cpu_milli) * c.fit_cpu_weight +
                one(pm, n.host.memory_mib) * c.fit_memory_weight) /
               weights;
    }
  }
  if (c.balanced_weight > 0) {
    auto fraction = [](std::int64_t req, std::int64_t cap) {
      return cap == 0 ? 0.0 : std::min(1.0, static_cast<double>(req) / static_cast<double>(cap));
    };
    const double fc = fraction(cpu + p.cpu_milli, n.host.cpu_milli);
    const double fm = fraction(memory + p.memory_mib, n.host.memory_mib);
    const double sd = std::abs(fc - fm) / 2;  // the standard deviation of two fractions
    total += c.balanced_weight * static_cast<std::int64_t>((1 - sd) * 100);
  }
  return total;
}

bool interested(const SchedulerConfig& c, const TracePod& p) {
  if (c.managed.empty()) return true;
  const std::string asked = p.num_gpu == 0 ? ""
                            : is_share(p)  ? "gapless.io/gpu-compute"
                                           : "nvidia.com/gpu";
  return !asked.empty() && std::find(c.managed.begin(), c.managed.end(), asked) != c.managed.end();
}

}  // namespace

std::size_t feasible_nodes_to_find(int percentage, std::size_t all) {
  constexpr std::size_t kMinFeasible = 100;  // minFeasibleNodesToFind
  if (all < kMinFeasible) return all;
  std::int64_t pct = percentage;
  if (pct <= 0) pct = std::max<std::int64_t>(50 - static_cast<std::int64_t>(all) / 125, 5);
  const std::size_t n = all * static_cast<std::size_t>(std::min<std::int64_t>(pct, 100)) / 100;
  return std::max(n, kMinFeasible);
}

KubeScheduler::KubeScheduler(const std::vector<model::Node>& nodes, const SchedulerConfig& config,
                             ExtenderPort& extender, std::uint64_t seed)
    : nodes_(nodes),
      config_(config),
      extender_(extender),
      pick_(seed ^ 0xdeb1045eedULL),
      requested_(nodes.size()) {
  for (std::size_t i = 0; i < nodes.size(); ++i) index_[nodes[i].name] = i;
  for (const model::Node& n : nodes) {
    if (!n.gpus.empty()) product_labels_.insert(n.gpus[0].model);  // as node_object labels it
  }
}

const std::optional<std::set<std::string>>& KubeScheduler::pin(const TracePod& pod) const {
  auto [it, fresh] = pins_.try_emplace(pod.gpu_spec);
  if (fresh) {
    // Every node is labelled here, so a name no label matches is one no GPU has.
    k8s::ModelPin p = k8s::resolve_model_pin(pod.gpu_spec, product_labels_);
    if (p.pinnable) it->second.emplace(p.values.begin(), p.values.end());
  }
  return it->second;
}

bool KubeScheduler::fits(const TracePod& pod, std::size_t n) const {
  const Requested& r = requested_[n];
  const model::Node& node = nodes_[n];
  if (config_.models_as_node_affinity && !pod.gpu_spec.empty()) {
    // NodeAffinity, `nvidia.com/gpu.product In (pin)`: the label is the first GPU's model, as
    // node_object writes it.
    const auto& values = pin(pod);
    if (values && (node.gpus.empty() || !values->contains(node.gpus[0].model))) return false;
  }
  return r.cpu + pod.cpu_milli <= node.host.cpu_milli &&
         r.memory + pod.memory_mib <= node.host.memory_mib &&
         r.gpus + nvidia_gpus(pod) <= static_cast<std::int64_t>(node.gpus.size());
}

std::size_t KubeScheduler::schedule(const TracePod& pod, const std::string& uid,
                                    std::int64_t* granted) {
  *granted = 0;
  feasible_.clear();
  const std::size_t all = nodes_.size();
  const std::size_t to_find = feasible_nodes_to_find(config_.percentage_of_nodes_to_score, all);
  std::size_t looked = 0;
  while (looked < all && feasible_.size() < to_find) {
    const std::size_t i = (next_start_ + looked++) % all;
    if (fits(pod, i)) feasible_.push_back(nodes_[i].name);
  }
  if (all > 0) next_start_ = (next_start_ + looked) % all;
  const bool ours = config_.has_extender && interested(config_, pod);
  if (ours && config_.filter_verb && !feasible_.empty()) {
    std::vector<std::string> passed;
    if (!extender_.filter(pod, uid, feasible_, &passed)) return nodes_.size();
    feasible_ = std::move(passed);
  }
  if (feasible_.empty()) return nodes_.size();
  const std::string chosen = feasible_.size() == 1 ? feasible_[0] : pick(pod, uid, ours);
  if (ours && config_.bind_verb) {
    if (!extender_.bind(pod, uid, chosen, granted)) return nodes_.size();
  } else {
    extender_.bound_elsewhere(pod, uid, chosen);
  }
  const std::size_t n = index_.at(chosen);
  account(pod, n, 1);
  return n;
}

std::string KubeScheduler::pick(const TracePod& pod, const std::string& uid, bool ours) {
  total_.assign(feasible_.size(), 0);
  for (std::size_t k = 0; k < feasible_.size(); ++k) {
    const std::size_t i = index_.at(feasible_[k]);
    const Requested& r = requested_[i];
    total_[k] = plugin_score(config_, nodes_[i], r.cpu_nz, r.memory_nz, r.cpu, r.memory, pod);
  }
  std::vector<int> ext;
  if (ours && config_.prioritize_verb && extender_.prioritize(pod, uid, feasible_, &ext)) {
    for (std::size_t k = 0; k < feasible_.size(); ++k) total_[k] += ext[k] * config_.weight * 10;
  }
  // selectHost: reservoir sampling over the highest totals.
  std::string chosen;
  std::int64_t best = -1;
  std::uint64_t ties = 0;
  for (std::size_t k = 0; k < feasible_.size(); ++k) {
    if (total_[k] > best) {
      best = total_[k];
      ties = 1;
      chosen = feasible_[k];
    } else if (total_[k] == best && pick_.below(++ties) == 0) {
      chosen = feasible_[k];
    }
  }
  return chosen;
}

void KubeScheduler::remove(const TracePod& pod, const std::string& uid, std::size_t n) {
  account(pod, n, -1);
  extender_.deleted(uid);
}

void KubeScheduler::account(const TracePod& pod, std::size_t n, int sign) {
  Requested& r = requested_[n];
  r.cpu += sign * pod.cpu_milli;
  r.memory += sign * pod.memory_mib;
  r.cpu_nz += sign * std::max(pod.cpu_milli, kDefaultCpuMilli);
  r.memory_nz += sign * (pod.memory_mib > 0 ? pod.memory_mib : kDefaultMemoryMiB);
  r.gpus += sign * nvidia_gpus(pod);
}

RunResult replay_deployed(const std::vector<model::Node>& nodes, const Workload& w,
                          const Arrivals& a, const SchedulerConfig& config, ExtenderPort& extender,
                          std::uint64_t seed) {
  const auto start = std::chrono::steady_clock::now();
  KubeScheduler kube(nodes, config, extender, seed);
  RunResult out;
  out.events.reserve(a.order.size());
  std::int64_t arrived = 0, used = 0;
  for (std::size_t step = 0; step < a.order.size(); ++step) {
    const TracePod& pod = w.pods[a.order[step]];
    arrived += pod.gpu_request();
    std::int64_t granted = 0;
    if (kube.schedule(pod, "pod-" + std::to_string(step), &granted) == kube.node_count()) {
      ++out.failed;  // dropped, as the paper's procedure does
    } else {
      ++out.placed;
      used += granted;
    }
    out.events.push_back({arrived, used, 0.0});
  }
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

}  // namespace gapless::bench
