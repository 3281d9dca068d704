// Pod JSON -> ParsedPod. Two passes: collect every GPU resource the containers name (with the
// Kubernetes effective-request rule), then decide the one request kind and validate it.
#include "gapless/k8s/pod_request.h"

#include <algorithm>
#include <climits>
#include <map>
#include <string>
#include <vector>

#include "gapless/k8s/device_asks.h"
#include "gapless/k8s/json_fields.h"
#include "gapless/k8s/mig_resource.h"
#include "gapless/k8s/pod_movability.h"
#include "gapless/k8s/quantity.h"
#include "gapless/model/gpu.h"
#include "gapless/model/mig.h"

namespace gapless::k8s {

using nlohmann::json;

namespace {

constexpr std::string_view kWholeGpu = "nvidia.com/gpu";
constexpr std::string_view kMigPrefix = kMigResourcePrefix;
constexpr std::string_view kGpushareMem = "aliyun.com/gpu-mem";
constexpr std::string_view kGaplessPrefix = "gapless.io/";
constexpr std::string_view kSharedMemory = "gapless.io/gpu-memory";
constexpr std::string_view kSharedCompute = "gapless.io/gpu-compute";
constexpr std::string_view kSharedCount = "gapless.io/gpu-shared-count";

using Resources = std::map<std::string, std::int64_t, std::less<>>;

constexpr std::string_view kCpu = "cpu";
constexpr std::string_view kMemory = "memory";

bool is_host(std::string_view name) {
  return name == kCpu || name == kMemory;
}

// Resources Gapless reads: its GPU resources, and CPU and memory (scored beside the GPUs, never
// filtered on: kube-scheduler's NodeResourcesFit does that). Other vendors' are not ours.
Status check_resource_name(const std::string& name, bool* ours) {
  *ours = false;
  if (name == kWholeGpu || name == kGpushareMem || is_host(name)) {
    *ours = true;
  } else if (name.starts_with(kMigPrefix)) {
    if (name.size() == kMigPrefix.size()) return Error{"unknown resource " + name};
    *ours = true;
  } else if (name.starts_with(kGaplessPrefix)) {
    if (name != kSharedMemory && name != kSharedCompute && name != kSharedCount) {
      return Error{"unknown resource " + name + " (Gapless reads gapless.io/gpu-memory, " +
                   "gapless.io/gpu-compute and gapless.io/gpu-shared-count)"};
    }
    *ours = true;
  }
  return Status::Ok();
}

// A MIG profile no GPU type in the table offers is a typo (nvidia.com/mig-1g.10gbb), not a node
// problem: refuse the pod with the names that exist, instead of a "no such profile" per node.
Status check_mig_profile(const std::string& resource, const std::string& profile) {
  const std::vector<std::string_view> known = model::known_mig_profile_names();
  if (std::binary_search(known.begin(), known.end(), profile)) return Status::Ok();
  std::string names;
  for (std::string_view k : known) names += (names.empty() ? "" : ", ") + std::string(k);
  return Error{resource + ": unknown MIG profile " + profile + "; known profiles: " + names};
}

// Adds one resource list (limits or requests) of a container; `skip` names resources already
// taken from limits, which win over requests.
Status read_resource_list(const json* list, const std::string& where, const Resources* skip,
                          Resources* out) {
  if (list == nullptr) return Status::Ok();
  if (!list->is_object()) return Error{where + ": must be an object"};
  for (const auto& [name, value] : list->items()) {
    bool ours = false;
    if (Status s = check_resource_name(name, &ours); !s.ok()) return s;
    if (!ours || (skip != nullptr && skip->contains(name) && !is_host(name))) continue;
    if (is_host(name)) {
      // CPU and memory: requests win over limits (a missing request defaults to the limit).
      if (!value.is_string() && !value.is_number_integer())
        return Error{name + ": must be a quantity"};
      const std::string text = value.is_string() ? value.get<std::string>() : value.dump();
      Result<std::int64_t> q =
          parse_host_quantity(text, name == kCpu ? HostUnit::kMilli : HostUnit::kMiB);
      if (!q.ok()) return Error{name + ": " + q.error()};
      (*out)[name] = *q;
      continue;
    }
    Result<std::int64_t> q = quantity_value(value);
    if (!q.ok()) return Error{name + ": " + q.error()};
    (*out)[name] = *q;
  }
  return Status::Ok();
}

Status container_resources(const json& c, const std::string& where, Resources* out) {
  if (!c.is_object()) return Error{where + ": must be an object"};
  const json* res = field(c, "resources");
  if (res != nullptr && !res->is_object()) return Error{where + ".resources: must be an object"};
  Resources limits;
  if (Status s =
          read_resource_list(field(res, "limits"), where + ".resources.limits", nullptr, &limits);
      !s.ok()) {
    return s;
  }
  *out = limits;
  return read_resource_list(field(res, "requests"), where + ".resources.requests", &limits, out);
}

// Quantities are at most 2^53; saturating at 2^61 keeps sums over any number of containers
// from overflowing, and such values fail the range checks anyway.
void add_into(const Resources& from, Resources* to) {
  constexpr std::int64_t kCap = std::int64_t{1} << 61;
  for (const auto& [name, v] : from) (*to)[name] = std::min((*to)[name] + v, kCap);
}

void max_into(const Resources& from, Resources* to) {
  for (const auto& [name, v] : from) (*to)[name] = std::max((*to)[name], v);
}

// Kubernetes' effective request (resource.PodRequests): the sum over containers, against the
// peak during init. Sidecars (init containers with restartPolicy Always) keep running, so they
// add to both the containers' sum and every later init step.
Status effective_resources(const json* spec, Resources* out) {
  const json* containers = field(spec, "containers");
  const json* inits = field(spec, "initContainers");
  for (const auto& [list, key] : {std::pair{containers, "containers"}, {inits, "initContainers"}}) {
    if (list != nullptr && !list->is_array()) {
      return Error{std::string("spec.") + key + ": must be a list"};
    }
  }
  Resources sum;
  if (containers != nullptr) {
    for (std::size_t i = 0; i < containers->size(); ++i) {
      Resources r;
      std::string where = "spec.containers[" + std::to_string(i) + "]";
      if (Status s = container_resources((*containers)[i], where, &r); !s.ok()) return s;
      add_into(r, &sum);
    }
  }
  Resources sidecars, init_peak;
  if (inits != nullptr) {
    for (std::size_t i = 0; i < inits->size(); ++i) {
      Resources r;
      std::string where = "spec.initContainers[" + std::to_string(i) + "]";
      if (Status s = container_resources((*inits)[i], where, &r); !s.ok()) return s;
      if (string_field((*inits)[i], "restartPolicy") == "Always") {
        add_into(r, &sum);
        add_into(r, &sidecars);
        max_into(sidecars, &init_peak);
      } else {
        add_into(sidecars, &r);
        max_into(r, &init_peak);
      }
    }
  }
  max_into(init_peak, &sum);
  *out = std::move(sum);
  return Status::Ok();
}

// Counts must fit an int; values come from parse_whole_quantity, so they are >= 0.
Status as_count(const Resources& r, std::string_view name, int* out) {
  auto it = r.find(name);
  std::int64_t v = it == r.end() ? 0 : it->second;
  if (v > INT_MAX) {
    return Error{std::string(name) + ": must be at most " + std::to_string(INT_MAX) + ", got " +
                 std::to_string(v)};
  }
  *out = static_cast<int>(v);
  return Status::Ok();
}

std::string trim(std::string_view s) {
  auto first = s.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) return {};
  auto last = s.find_last_not_of(" \t\r\n");
  return std::string(s.substr(first, last - first + 1));
}

// Decides the request kind from the effective resources and validates each kind's rules.
Status build_request(const Resources& r, model::GpuRequest* req) {
  if (auto it = r.find(kCpu); it != r.end()) req->host.cpu_milli = it->second;
  if (auto it = r.find(kMemory); it != r.end()) req->host.memory_mib = it->second;
  std::vector<std::pair<model::RequestKind, std::string>> kinds;  // what the pod asks, described

  if (Status s = as_count(r, kWholeGpu, &req->whole); !s.ok()) return s;
  if (req->whole > 0) kinds.emplace_back(model::RequestKind::kWhole, "whole GPUs (nvidia.com/gpu)");

  std::int64_t memory = r.contains(kSharedMemory) ? r.find(kSharedMemory)->second : 0;
  if (auto it = r.find(kSharedCompute); it != r.end()) {
    if (it->second < 1 || it->second > model::kFullComputeMilli) {
      return Error{"gapless.io/gpu-compute: must be 1..1000 (milli-GPU), got " +
                   std::to_string(it->second)};
    }
    req->shared.compute_milli = static_cast<int>(it->second);
  }
  req->shared.memory_mib = memory;
  bool shared = memory > 0 || req->shared.compute_milli > 0;
  if (r.contains(kSharedCount)) {
    if (Status s = as_count(r, kSharedCount, &req->shared.count); !s.ok()) return s;
    if (req->shared.count < 1) {
      return Error{"gapless.io/gpu-shared-count: must be at least 1, got " +
                   std::to_string(req->shared.count)};
    }
    if (!shared) {
      return Error{
          "gapless.io/gpu-shared-count: needs gapless.io/gpu-memory or gapless.io/gpu-compute"};
    }
  }
  if (shared) {
    kinds.emplace_back(model::RequestKind::kShared, memory > 0
                                                        ? "shared GPUs (gapless.io/gpu-memory)"
                                                        : "shared GPUs (gapless.io/gpu-compute)");
  }

  for (const auto& [name, v] : r) {
    if (!name.starts_with(kMigPrefix) || v == 0) continue;
    std::string profile = mig_profile_from_resource(name.substr(kMigPrefix.size()));
    if (Status s = check_mig_profile(name, profile); !s.ok()) return s;
    if (!req->mig_profile.empty()) {
      return Error{"pod asks for two MIG profiles (" + mig_resource_name(req->mig_profile) +
                   " and " + name + "); a pod may use one profile"};
    }
    req->mig_profile = profile;
    if (Status s = as_count(r, name, &req->mig_count); !s.ok()) return s;
    kinds.emplace_back(model::RequestKind::kMig, "a MIG profile (" + name + ")");
  }

  if (auto it = r.find(kGpushareMem); it != r.end() && it->second > 0) {
    req->gpushare_units = it->second;
    kinds.emplace_back(model::RequestKind::kGpushare, "gpushare memory (aliyun.com/gpu-mem)");
  }

  if (kinds.size() > 1) {
    return Error{"pod asks for " + kinds[0].second + " and " + kinds[1].second + " together"};
  }
  if (!kinds.empty()) req->kind = kinds[0].first;
  if (req->kind != model::RequestKind::kShared) req->shared = model::SharedAsk{};
  return Status::Ok();
}

// The gapless.io/* annotations of the pod (a non-string value is an error).
Status read_annotations(const json* annotations, model::GpuRequest* req, std::string* policy) {
  auto text = [&](std::string_view key, std::string* out) -> Status {
    const json* v = field(annotations, key);
    if (v == nullptr) return Status::Ok();
    if (!v->is_string()) return Error{std::string(key) + ": must be a string"};
    *out = v->get<std::string>();
    return Status::Ok();
  };
  std::string models, topology;
  bool has_topology = field(annotations, "gapless.io/topology") != nullptr;
  for (const auto& [key, out] : {std::pair{"gapless.io/gpu-models", &models},
                                 {"gapless.io/topology", &topology},
                                 {"gapless.io/policy", policy}}) {
    if (Status s = text(key, out); !s.ok()) return s;
  }

  req->models = comma_list(models);

  if (has_topology) {
    std::string wish = trim(topology);
    if (wish == "nvlink-required") {
      req->topology = model::TopologyWish::kNvlinkRequired;
    } else if (wish == "nvlink-preferred") {
      req->topology = model::TopologyWish::kNvlinkPreferred;
    } else if (wish == "none") {
      req->topology = model::TopologyWish::kNone;
    } else {
      return Error{
          "gapless.io/topology: must be nvlink-required, nvlink-preferred or none, got \"" +
          topology + "\""};
    }
  } else {
    bool multi = (req->kind == model::RequestKind::kWhole && req->whole >= 2) ||
                 (req->kind == model::RequestKind::kShared && req->shared.count >= 2);
    req->topology = multi ? model::TopologyWish::kNvlinkPreferred : model::TopologyWish::kNone;
  }
  return Status::Ok();
}

}  // namespace

Result<ParsedPod> parse_pod(const json& pod) {
  if (!pod.is_object()) return Error{"pod: must be a JSON object"};
  ParsedPod out;
  const json* meta = field(pod, "metadata");
  const json* spec = field(pod, "spec");
  if (meta != nullptr && !meta->is_object()) return Error{"metadata: must be an object"};
  if (spec != nullptr && !spec->is_object()) return Error{"spec: must be an object"};

  model::PodInfo& info = out.info;
  if (meta != nullptr) {
    info.ns = string_field(*meta, "namespace");
    info.name = string_field(*meta, "name");
    info.uid = string_field(*meta, "uid");
    info.labels = string_map(field(*meta, "labels"));
  }
  if (info.ns.empty()) info.ns = "default";  // as kubectl and the API server default it
  if (spec != nullptr) {
    info.priority_class = string_field(*spec, "priorityClassName");
    info.node = string_field(*spec, "nodeName");
    if (const json* prio = field(*spec, "priority")) {
      const std::optional<std::int64_t> v = as_int64(*prio);
      if (!v || *v < INT32_MIN || *v > INT32_MAX) {
        return Error{"spec.priority: must be a 32-bit integer, got " + json_text(*prio)};
      }
      info.priority = static_cast<std::int32_t>(*v);
    }
  }

  Resources effective;
  if (Status s = effective_resources(spec, &effective); !s.ok()) return Error{s.error()};
  if (Status s = build_request(effective, &out.request); !s.ok()) return Error{s.error()};
  const json* annotations = field(meta, "annotations");
  if (annotations != nullptr && !annotations->is_object()) {
    return Error{"metadata.annotations: must be an object"};
  }
  if (Status s = read_annotations(annotations, &out.request, &info.policy); !s.ok()) {
    return Error{s.error()};
  }
  out.device_classes = device_classes(pod);
  info.movable = pod_movability(pod);
  if (const json* status = field(pod, "status"); status != nullptr && status->is_object()) {
    info.started_unix_s = unix_seconds(string_field(*status, "startTime")).value_or(-1);
  }
  return out;
}

}  // namespace gapless::k8s
