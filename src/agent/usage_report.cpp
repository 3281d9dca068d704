#include "gapless/agent/usage_report.h"

#include <prometheus/metric_family.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "gapless/k8s/allocation_record.h"
#include "gapless/k8s/json_fields.h"
#include "gapless/k8s/pod_api.h"

namespace gapless::agent {

using nlohmann::json;
using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

namespace {

constexpr double kMiB = 1024.0 * 1024.0;

struct PodFacts {
  std::string ns, name, uid;
  std::map<std::string, std::string> container_of_id;  // runtime ID -> container name
  std::map<int, std::int64_t> share_mib;               // GPU -> memoryMiB the record grants
};

// "containerd://<id>" -> "<id>".
std::string runtime_id(const std::string& container_id) {
  const std::size_t sep = container_id.find("://");
  return sep == std::string::npos ? container_id : container_id.substr(sep + 3);
}

std::map<std::string, PodFacts> pods_by_uid(const json& pod_list) {
  std::map<std::string, PodFacts> out;
  if (!pod_list.is_object() || !pod_list.contains("items") || !pod_list["items"].is_array()) {
    return out;
  }
  for (const json& p : pod_list["items"]) {
    const json* meta = k8s::field(p, "metadata");
    if (meta == nullptr) continue;
    PodFacts f{k8s::string_field(*meta, "namespace"),
               k8s::string_field(*meta, "name"),
               k8s::string_field(*meta, "uid"),
               {},
               {}};
    if (f.uid.empty()) continue;
    const json status = p.value("status", json::object());
    for (const char* key : {"initContainerStatuses", "containerStatuses"}) {
      if (!status.is_object() || !status.contains(key) || !status[key].is_array()) continue;
      for (const json& c : status[key]) {
        if (c.is_object() && c.value("containerID", json()).is_string()) {
          f.container_of_id[runtime_id(c["containerID"].get<std::string>())] =
              c.value("name", std::string());
        }
      }
    }
    const json annotations = p.value("metadata", json::object()).value("annotations", json());
    if (annotations.is_object() &&
        annotations.value(std::string(k8s::kAllocationAnnotation), json()).is_string()) {
      auto record = k8s::decode_allocation_record(
          annotations[std::string(k8s::kAllocationAnnotation)].get<std::string>(), f.ns, f.name,
          f.uid);
      if (record.ok()) {
        for (const model::GpuGrant& g : record->gpus) {
          if (g.memory_mib > 0) f.share_mib[g.index] += g.memory_mib;
        }
      }
    }
    out.emplace(f.uid, std::move(f));
  }
  return out;
}

MetricFamily family(const char* name, const char* help, MetricType type) {
  return MetricFamily{name, help, type, {}};
}

void sample(MetricFamily& f, std::vector<ClientMetric::Label> labels, double v) {
  ClientMetric m;
  m.label = std::move(labels);
  if (f.type == MetricType::Counter) {
    m.counter.value = v;
  } else {
    m.gauge.value = v;
  }
  f.metric.push_back(std::move(m));
}

}  // namespace

UsageView attribute_usage(std::vector<GpuUsageSample> gpus, const json& pod_list,
                          const std::function<std::optional<CgroupPod>(unsigned int)>& cgroup_of) {
  UsageView view;
  const std::map<std::string, PodFacts> pods = pods_by_uid(pod_list);
  // (uid, container, gpu) -> MiB, summed over the container's processes.
  std::map<std::tuple<std::string, std::string, int>, std::int64_t> held;
  for (const GpuUsageSample& g : gpus) {
    for (const ProcessMemory& p : g.processes) {
      const std::int64_t mib = std::max<std::int64_t>(p.used_mib, 0);
      const std::optional<CgroupPod> owner = cgroup_of(p.pid);
      const auto pod = owner ? pods.find(owner->pod_uid) : pods.end();
      if (pod == pods.end()) {
        view.unattributed[g.index] += mib;
        continue;
      }
      const auto c = pod->second.container_of_id.find(owner->container_id);
      const std::string container = c == pod->second.container_of_id.end() ? "" : c->second;
      held[{pod->first, container, g.index}] += mib;
    }
  }
  // Per pod and GPU: the sum over containers, against the record's share.
  std::map<std::pair<std::string, int>, Overuse> per_gpu;
  std::map<std::pair<std::string, int>, std::int64_t> largest;  // the container named
  for (const auto& [key, mib] : held) {
    const auto& [uid, container, gpu] = key;
    const PodFacts& f = pods.at(uid);
    view.pods.push_back({f.ns, f.name, uid, container, gpu, mib});
    Overuse& o = per_gpu[{uid, gpu}];
    if (auto [it, first] = largest.try_emplace({uid, gpu}, mib); first || mib > it->second) {
      it->second = mib;
      o.container = container;
    }
    o.ns = f.ns;
    o.pod = f.name;
    o.uid = uid;
    o.gpu = gpu;
    o.used_mib += mib;
  }
  for (auto& [key, o] : per_gpu) {
    const PodFacts& f = pods.at(key.first);
    const auto share = f.share_mib.find(key.second);
    if (share == f.share_mib.end() || o.used_mib <= share->second) continue;
    o.limit_mib = share->second;
    view.overuse.push_back(o);
  }
  view.gpus = std::move(gpus);
  return view;
}

UsageReporter::UsageReporter(UsageOptions options, k8s::ApiTransport* api,
                             std::function<void(const std::string&)> log)
    : options_(std::move(options)), api_(api), log_(std::move(log)) {}

Result<json> UsageReporter::list_pods() const {
  if (api_ == nullptr) return json::object();
  return k8s::list_node_pods(*api_, options_.node_name);
}

Status UsageReporter::update(const NvmlLibrary& nvml) {
  std::vector<GpuUsageSample> gpus = read_gpu_usage(nvml, log_);
  auto pods = list_pods();
  // Without the pod list, usage per GPU is still worth exporting; nothing is attributed.
  const json pod_list = pods.ok() ? *pods : json::object();
  const std::string root = options_.proc_root;
  UsageView view = attribute_usage(std::move(gpus), pod_list,
                                   [&root](unsigned int pid) { return pod_of_pid(root, pid); });
  follow_episodes(view);
  {
    std::lock_guard lock(mu_);
    view_ = std::move(view);
  }
  if (!pods.ok()) return Error{pods.error()};
  return Status::Ok();
}

void UsageReporter::follow_episodes(const UsageView& view) {
  std::set<std::pair<std::string, int>> now;
  std::map<std::string, json> marks;  // uid -> the annotation's list
  for (const Overuse& o : view.overuse) {
    now.insert({o.uid, o.gpu});
    names_[o.uid] = {o.ns, o.pod};
    marks[o.uid].push_back({{"gpu", o.gpu}, {"usedMiB", o.used_mib}, {"limitMiB", o.limit_mib}});
    if (over_.count({o.uid, o.gpu}) != 0) continue;  // the same episode
    {
      std::lock_guard lock(mu_);
      ++episodes_;
    }
    post_event(o);
  }
  over_ = std::move(now);
  // The annotation follows the episodes: written when it changes, removed when they end.
  for (const auto& [uid, list] : marks) {
    const std::string value = list.dump();
    if (annotated_[uid] == value) continue;
    annotate(names_[uid].first, names_[uid].second, value);
    annotated_[uid] = value;
  }
  for (auto it = annotated_.begin(); it != annotated_.end();) {
    if (marks.count(it->first) != 0) {
      ++it;
      continue;
    }
    annotate(names_[it->first].first, names_[it->first].second, "");
    it = annotated_.erase(it);
  }
}

void UsageReporter::post_event(const Overuse& o) {
  const std::string message = "container " + (o.container.empty() ? "?" : o.container) + " holds " +
                              std::to_string(o.used_mib) + " MiB on GPU " + std::to_string(o.gpu) +
                              ", over the " + std::to_string(o.limit_mib) +
                              " MiB its share was given";
  if (log_) log_("share over-use: " + o.ns + "/" + o.pod + ": " + message);
  if (api_ == nullptr) return;
  const std::string failed =
      k8s::post_pod_event(*api_, k8s::PodEvent{.ns = o.ns,
                                               .name = o.pod,
                                               .uid = o.uid,
                                               .reason = std::string(kShareOveruseReason),
                                               .message = message,
                                               .component = "gapless-agent",
                                               .host = options_.node_name,
                                               .name_suffix = "gapless-overuse-"});
  if (!failed.empty() && log_) {
    log_("posting the over-use Event on " + o.ns + "/" + o.pod + ": " + failed);
  }
}

void UsageReporter::annotate(const std::string& ns, const std::string& pod,
                             const std::string& value) {
  if (api_ == nullptr || pod.empty()) return;
  const std::string failed = k8s::annotate_pod(*api_, ns, pod, kShareOveruseAnnotation, value);
  if (!failed.empty() && log_) {
    log_("annotating " + ns + "/" + pod + " with " + kShareOveruseAnnotation + ": " + failed);
  }
}

std::uint64_t UsageReporter::overuse_episodes() const {
  std::lock_guard lock(mu_);
  return episodes_;
}

std::vector<MetricFamily> UsageReporter::Collect() const {
  std::lock_guard lock(mu_);
  MetricFamily util =
      family("gapless_agent_gpu_utilization_ratio",
             "Fraction of NVML's last sample period a kernel ran on the GPU.", MetricType::Gauge);
  MetricFamily used = family("gapless_agent_gpu_memory_used_bytes",
                             "GPU memory in use, as NVML reports it.", MetricType::Gauge);
  MetricFamily pods =
      family("gapless_agent_pod_gpu_memory_used_bytes",
             "GPU memory held by a pod's container (its processes on the GPU).", MetricType::Gauge);
  MetricFamily stray =
      family("gapless_agent_gpu_memory_unattributed_bytes",
             "GPU memory held by processes in no pod of this node.", MetricType::Gauge);
  for (const GpuUsageSample& g : view_.gpus) {
    const std::string gpu = std::to_string(g.index);
    if (g.utilization_percent >= 0) {
      sample(util, {{"gpu", gpu}, {"uuid", g.uuid}}, g.utilization_percent / 100.0);
    }
    if (g.memory_used_mib >= 0) {
      sample(used, {{"gpu", gpu}, {"uuid", g.uuid}}, static_cast<double>(g.memory_used_mib) * kMiB);
    }
    const auto it = view_.unattributed.find(g.index);
    sample(stray, {{"gpu", gpu}},
           it == view_.unattributed.end() ? 0.0 : static_cast<double>(it->second) * kMiB);
  }
  for (const PodGpuMemory& p : view_.pods) {
    sample(pods,
           {{"container", p.container},
            {"gpu", std::to_string(p.gpu)},
            {"namespace", p.ns},
            {"pod", p.pod}},
           static_cast<double>(p.used_mib) * kMiB);
  }
  MetricFamily over_now = family("gapless_agent_share_overuse_containers",
                                 "Pods (per GPU) holding more GPU memory than their share's "
                                 "memoryMiB now.",
                                 MetricType::Gauge);
  sample(over_now, {}, static_cast<double>(view_.overuse.size()));
  MetricFamily episodes =
      family("gapless_agent_share_overuse_total",
             "Share over-use episodes begun (one Warning Event each).", MetricType::Counter);
  sample(episodes, {}, static_cast<double>(episodes_));
  return {util, used, pods, stray, over_now, episodes};
}

}  // namespace gapless::agent
