// The DevicePlugin gRPC service behind agent::DevicePlugin (device_plugin.h), and the device
// table it shares with the agent's scans. Private to src/agent/.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "deviceplugin/v1beta1/api.grpc.pb.h"
#include "gapless/agent/allocation_checkpoint.h"
#include "gapless/agent/device_plugin.h"
#include "gapless/agent/pod_match.h"

namespace gapless::agent {

struct PluginDevice {
  std::string id;        // what the kubelet sees: the UUID, or "<UUID>::<k>" for share slots
  std::string gpu_uuid;  // the GPU it stands for
  int gpu_index = 0;
  bool healthy = true;
  int numa = -1;
  int mig_start = -1;  // MIG resources: the placement's first memory slice
  bool operator==(const PluginDevice&) const = default;
};

// "<GPU UUID>::slice-<start>": a MIG resource's device for the placement at `start`.
std::string mig_device_id(const std::string& gpu_uuid, int start);

// The devices and their health, versioned so ListAndWatch streams send each change once.
// Thread-safe.
class DeviceTable {
 public:
  void set(std::vector<PluginDevice> devices);
  std::vector<PluginDevice> snapshot(std::uint64_t* version) const;
  // Waits up to `slice` for a version other than `seen` or an interruption; false when the
  // streams must end (interrupt() since `epoch`).
  bool wait(std::uint64_t seen, std::uint64_t epoch, std::chrono::milliseconds slice) const;
  std::uint64_t epoch() const;
  void interrupt();  // ends the open streams (server restart or stop)
  std::optional<PluginDevice> by_id(const std::string& id) const;
  std::optional<PluginDevice> gpu(const std::string& uuid) const;  // its first device
  std::optional<PluginDevice> gpu_at(int index) const;

 private:
  mutable std::mutex mu_;
  mutable std::condition_variable changed_;
  std::vector<PluginDevice> devices_;
  std::uint64_t version_ = 0;
  std::uint64_t epoch_ = 0;
};

// The container's environment: NVIDIA_VISIBLE_DEVICES for `gpus`, and for shares the limits of
// MPS and HAMi-core per visible device (the grants are in the order of `gpus`).
std::map<std::string, std::string> container_env(const std::vector<std::string>& gpus,
                                                 const std::vector<model::GpuGrant>& shares);

class DevicePluginService final : public v1beta1::DevicePlugin::Service {
 public:
  DevicePluginService(const DevicePluginOptions& options, k8s::ApiTransport& api,
                      DeviceTable& table, AllocationCheckpoint& checkpoint,
                      std::function<void(const std::string&)> log);

  grpc::Status GetDevicePluginOptions(grpc::ServerContext*, const v1beta1::Empty*,
                                      v1beta1::DevicePluginOptions* out) override;
  grpc::Status ListAndWatch(grpc::ServerContext* ctx, const v1beta1::Empty*,
                            grpc::ServerWriter<v1beta1::ListAndWatchResponse>* writer) override;
  grpc::Status GetPreferredAllocation(grpc::ServerContext*,
                                      const v1beta1::PreferredAllocationRequest* req,
                                      v1beta1::PreferredAllocationResponse* out) override;
  grpc::Status Allocate(grpc::ServerContext*, const v1beta1::AllocateRequest* req,
                        v1beta1::AllocateResponse* out) override;
  grpc::Status PreStartContainer(grpc::ServerContext*, const v1beta1::PreStartContainerRequest*,
                                 v1beta1::PreStartContainerResponse*) override;

 private:
  GrantKind kind() const {
    if (!mig_profile_of(options_.resource).empty()) return GrantKind::kMig;
    return options_.share_slots > 0 ? GrantKind::kShared : GrantKind::kWhole;
  }
  // The admission the kubelet is making for `count` devices (nullopt: no pending pod matches).
  // `pods`, if given, gets the node's pod list.
  Result<std::optional<Admission>> match(std::int64_t count, bool prune,
                                         nlohmann::json* pods = nullptr);
  Result<std::vector<std::string>> gpus_of(const std::optional<Admission>& admission,
                                           const std::vector<std::string>& ids) const;
  std::vector<std::string> preferred(const v1beta1::ContainerPreferredAllocationRequest& req);
  Status allocate_one(const std::vector<std::string>& ids, v1beta1::ContainerAllocateResponse* out);
  // device_plugin_pairing.cpp: whether the devices the kubelet passed are the record's (its
  // accounting must agree with what the container gets), and the gapless.io/allocated patch
  // once the pod's last container is served.
  Status kubelet_agrees(const Admission& a, const std::vector<std::string>& ids) const;
  void mark_allocated(const Admission& a);
  // The GPU a record names: by UUID when the record has one (a reboot may renumber indexes).
  std::optional<PluginDevice> record_gpu(const std::string& uuid, int index) const;
  // MIG (device_plugin_mig.cpp): the placements the container gets, and their MIG devices.
  Result<std::vector<MigSlot>> mig_slots_of(const std::optional<Admission>& admission,
                                            const std::vector<std::string>& ids) const;
  Result<std::vector<std::string>> mig_devices_for(const std::vector<MigSlot>& slots,
                                                   const nlohmann::json& pods);
  Result<std::vector<std::string>> allocate_mig(const std::optional<Admission>& admission,
                                                const std::vector<std::string>& ids,
                                                const nlohmann::json& pods);

  DevicePluginOptions options_;
  k8s::ApiTransport& api_;
  DeviceTable& table_;
  AllocationCheckpoint& checkpoint_;
  std::function<void(const std::string&)> log_;
  std::mutex admit_mu_;  // one admission at a time, as the kubelet makes them
};

}  // namespace gapless::agent
