#include "device_plugin_service.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>

#include "gapless/k8s/json_fields.h"
#include "gapless/k8s/pod_api.h"

namespace gapless::agent {

namespace {

// How long a ListAndWatch stream waits before it looks at its call's cancellation again.
constexpr std::chrono::milliseconds kStreamSlice{200};

grpc::Status failed(grpc::StatusCode code, const std::string& message) {
  return grpc::Status(code, message);
}

void fill(const std::vector<PluginDevice>& devices, v1beta1::ListAndWatchResponse* out) {
  for (const auto& d : devices) {
    auto* dev = out->add_devices();
    dev->set_id(d.id);
    dev->set_health(d.healthy ? "Healthy" : "Unhealthy");
    if (d.numa >= 0) dev->mutable_topology()->add_nodes()->set_id(d.numa);
  }
}

std::string joined(const std::vector<std::string>& items) {
  std::string s;
  for (const auto& i : items) s += (s.empty() ? "" : ",") + i;
  return s;
}

}  // namespace

DevicePluginService::DevicePluginService(const DevicePluginOptions& options, k8s::ApiTransport& api,
                                         DeviceTable& table, AllocationCheckpoint& checkpoint,
                                         std::function<void(const std::string&)> log)
    : options_(options), api_(api), table_(table), checkpoint_(checkpoint), log_(std::move(log)) {}

grpc::Status DevicePluginService::GetDevicePluginOptions(grpc::ServerContext*,
                                                         const v1beta1::Empty*,
                                                         v1beta1::DevicePluginOptions* out) {
  out->set_pre_start_required(false);
  out->set_get_preferred_allocation_available(true);
  return grpc::Status::OK;
}

grpc::Status DevicePluginService::ListAndWatch(
    grpc::ServerContext* ctx, const v1beta1::Empty*,
    grpc::ServerWriter<v1beta1::ListAndWatchResponse>* writer) {
  const std::uint64_t epoch = table_.epoch();
  std::uint64_t sent = 0;
  bool first = true;
  while (!ctx->IsCancelled()) {
    std::uint64_t version = 0;
    auto devices = table_.snapshot(&version);
    if (first || version != sent) {
      v1beta1::ListAndWatchResponse response;
      fill(devices, &response);
      if (!writer->Write(response)) break;  // the kubelet went away
      sent = version;
      first = false;
    }
    if (!table_.wait(sent, epoch, kStreamSlice)) break;
  }
  return grpc::Status::OK;
}

Result<std::optional<Admission>> DevicePluginService::match(std::int64_t count, bool prune,
                                                            nlohmann::json* pods_out) {
  auto listed = k8s::list_node_pods(api_, options_.node_name);
  if (!listed.ok()) return Error{listed.error()};
  nlohmann::json& pods = *listed;
  if (prune && pods.contains("items") && pods["items"].is_array()) {
    std::set<std::string> live;
    for (const auto& p : pods["items"]) {
      if (p.is_object())
        live.insert(k8s::string_field(p.value("metadata", nlohmann::json{}), "uid"));
    }
    if (checkpoint_.retain(live)) {
      if (Status s = checkpoint_.save(); !s.ok() && log_) log_(s.error());
    }
  }
  auto matched =
      match_admission(pods, options_.node_name, options_.resource, kind(), count, checkpoint_);
  if (pods_out != nullptr) *pods_out = std::move(pods);
  return matched;
}

// The GPUs the container gets: its record's, or those behind the kubelet's device IDs.
Result<std::vector<std::string>> DevicePluginService::gpus_of(
    const std::optional<Admission>& admission, const std::vector<std::string>& ids) const {
  std::vector<PluginDevice> found;  // copies: a scan may change the table meanwhile
  if (admission && admission->has_record) {
    for (const auto& g : admission->grants) {
      auto d = record_gpu(g.uuid, g.index);
      if (!d) {
        return Error{"GPU " + (g.uuid.empty() ? std::to_string(g.index) : g.uuid) +
                     " of the allocation record is not served here (absent or MIG-enabled)"};
      }
      found.push_back(*d);
    }
  } else {
    for (const auto& id : ids) {
      auto d = table_.by_id(id);
      if (!d) return Error{"unknown device " + id};
      found.push_back(*d);
    }
  }
  std::vector<std::string> gpus;
  for (const auto& d : found) {
    if (!d.healthy) return Error{"GPU " + d.gpu_uuid + " is unhealthy"};
    if (std::find(gpus.begin(), gpus.end(), d.gpu_uuid) == gpus.end()) gpus.push_back(d.gpu_uuid);
  }
  return gpus;
}

grpc::Status DevicePluginService::Allocate(grpc::ServerContext*,
                                           const v1beta1::AllocateRequest* req,
                                           v1beta1::AllocateResponse* out) {
  std::lock_guard lock(admit_mu_);
  for (const auto& container : req->container_requests()) {
    std::vector<std::string> ids(container.devices_ids().begin(), container.devices_ids().end());
    if (Status s = allocate_one(ids, out->add_container_responses()); !s.ok()) {
      if (log_) log_("Allocate " + joined(ids) + ": " + s.error());
      return failed(grpc::StatusCode::FAILED_PRECONDITION, s.error());
    }
  }
  return grpc::Status::OK;
}

Status DevicePluginService::allocate_one(const std::vector<std::string>& ids,
                                         v1beta1::ContainerAllocateResponse* out) {
  if (ids.empty()) return Error{"no devices to allocate"};
  nlohmann::json pods;
  auto admission = match(static_cast<std::int64_t>(ids.size()), true, &pods);
  if (!admission.ok()) return Error{admission.error()};
  if (*admission) {
    if (Status s = kubelet_agrees(**admission, ids); !s.ok()) return s;
  }
  // For MIG, the "GPUs" are the MIG devices (MIG-… UUIDs), made now if missing.
  auto gpus =
      kind() == GrantKind::kMig ? allocate_mig(*admission, ids, pods) : gpus_of(*admission, ids);
  if (!gpus.ok()) return Error{gpus.error()};
  std::vector<model::GpuGrant> shares;
  if (*admission && (*admission)->has_record && kind() == GrantKind::kShared) {
    shares = (*admission)->grants;
  }
  for (const auto& [k, v] : container_env(*gpus, shares)) (*out->mutable_envs())[k] = v;
  std::string who = "no pending pod matches, the kubelet's choice";
  if (*admission) {
    const Admission& a = **admission;
    checkpoint_.add({a.pod_uid, a.pod_ns, a.pod_name, a.container, *gpus});
    if (Status s = checkpoint_.save(); !s.ok() && log_) log_(s.error());
    if (a.last && a.has_record) mark_allocated(a);
    who = a.pod_ns + "/" + a.pod_name + " container " + a.container +
          (a.has_record ? ", its allocation record" : ", no record: the kubelet's choice");
  }
  if (log_) log_(options_.resource + ": " + joined(*gpus) + " to " + who);
  return {};
}

std::vector<std::string> DevicePluginService::preferred(
    const v1beta1::ContainerPreferredAllocationRequest& req) {
  const std::vector<std::string> available(req.available_deviceids().begin(),
                                           req.available_deviceids().end());
  std::vector<std::string> chosen(req.must_include_deviceids().begin(),
                                  req.must_include_deviceids().end());
  const auto size = static_cast<std::size_t>(std::max(0, req.allocation_size()));
  auto take = [&](const std::string& id) {
    if (chosen.size() < size && std::find(chosen.begin(), chosen.end(), id) == chosen.end()) {
      chosen.push_back(id);
    }
  };
  std::lock_guard lock(admit_mu_);
  auto admission = match(static_cast<std::int64_t>(size), false);
  if (admission.ok() && *admission && (*admission)->has_record && kind() == GrantKind::kMig) {
    // The record's placements themselves: each is one device.
    auto slots = mig_slots_of(*admission, {});
    for (const auto& slot : slots.ok() ? *slots : std::vector<MigSlot>{}) {
      const std::string id = mig_device_id(slot.gpu_uuid, slot.start);
      if (std::find(available.begin(), available.end(), id) != available.end()) take(id);
    }
  } else if (admission.ok() && *admission && (*admission)->has_record) {
    auto gpus = gpus_of(*admission, {});
    for (const auto& uuid : gpus.ok() ? *gpus : std::vector<std::string>{}) {
      // The GPU's device itself, or for shares the first available slot on it.
      for (const auto& id : available) {
        auto d = table_.by_id(id);
        if (d && d->gpu_uuid == uuid &&
            std::find(chosen.begin(), chosen.end(), id) == chosen.end()) {
          take(id);
          break;
        }
      }
    }
  }
  for (const auto& id : available) take(id);  // no record: the first available ones
  return chosen;
}

grpc::Status DevicePluginService::GetPreferredAllocation(
    grpc::ServerContext*, const v1beta1::PreferredAllocationRequest* req,
    v1beta1::PreferredAllocationResponse* out) {
  for (const auto& container : req->container_requests()) {
    auto* response = out->add_container_responses();
    for (const auto& id : preferred(container)) response->add_deviceids(id);
  }
  return grpc::Status::OK;
}

grpc::Status DevicePluginService::PreStartContainer(grpc::ServerContext*,
                                                    const v1beta1::PreStartContainerRequest*,
                                                    v1beta1::PreStartContainerResponse*) {
  return grpc::Status::OK;
}

}  // namespace gapless::agent
