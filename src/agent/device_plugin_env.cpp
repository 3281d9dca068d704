// The device table and the container environment of the device plugin (device_plugin_service.h).
#include <algorithm>

#include "device_plugin_service.h"

namespace gapless::agent {

void DeviceTable::set(std::vector<PluginDevice> devices) {
  std::lock_guard lock(mu_);
  if (devices == devices_) return;  // an unchanged scan is no update for the kubelet
  devices_ = std::move(devices);
  ++version_;
  changed_.notify_all();
}

std::vector<PluginDevice> DeviceTable::snapshot(std::uint64_t* version) const {
  std::lock_guard lock(mu_);
  if (version != nullptr) *version = version_;
  return devices_;
}

bool DeviceTable::wait(std::uint64_t seen, std::uint64_t epoch,
                       std::chrono::milliseconds slice) const {
  std::unique_lock lock(mu_);
  changed_.wait_for(lock, slice, [&] { return version_ != seen || epoch_ != epoch; });
  return epoch_ == epoch;
}

std::uint64_t DeviceTable::epoch() const {
  std::lock_guard lock(mu_);
  return epoch_;
}

void DeviceTable::interrupt() {
  std::lock_guard lock(mu_);
  ++epoch_;
  changed_.notify_all();
}

std::optional<PluginDevice> DeviceTable::by_id(const std::string& id) const {
  std::lock_guard lock(mu_);
  for (const auto& d : devices_) {
    if (d.id == id) return d;
  }
  return std::nullopt;
}

std::optional<PluginDevice> DeviceTable::gpu(const std::string& uuid) const {
  std::lock_guard lock(mu_);
  for (const auto& d : devices_) {
    if (d.gpu_uuid == uuid) return d;
  }
  return std::nullopt;
}

std::optional<PluginDevice> DeviceTable::gpu_at(int index) const {
  std::lock_guard lock(mu_);
  for (const auto& d : devices_) {
    if (d.gpu_index == index) return d;
  }
  return std::nullopt;
}

std::map<std::string, std::string> container_env(const std::vector<std::string>& gpus,
                                                 const std::vector<model::GpuGrant>& shares) {
  std::map<std::string, std::string> env;
  std::string visible;
  for (const auto& uuid : gpus) visible += (visible.empty() ? "" : ",") + uuid;
  // The NVIDIA container runtime (legacy env mode) mounts exactly these GPUs' device nodes.
  env["NVIDIA_VISIBLE_DEVICES"] = visible;
  if (shares.empty()) return env;
  // Inside the container the visible GPUs are CUDA devices 0..n-1 in this order.
  std::string mps_memory;
  int percent = 0;
  for (std::size_t i = 0; i < shares.size(); ++i) {
    const auto& s = shares[i];
    if (s.memory_mib > 0) {
      mps_memory += (mps_memory.empty() ? "" : ",") + std::to_string(i) + "=" +
                    std::to_string(s.memory_mib) + "M";
      env["CUDA_DEVICE_MEMORY_LIMIT_" + std::to_string(i)] = std::to_string(s.memory_mib) + "m";
    }
    // One percentage per container for both runtimes: the largest share asked (the contract
    // asks the same compute on every shared GPU of a pod).
    percent = std::max(percent, (s.compute_milli + 9) / 10);
  }
  if (!mps_memory.empty()) env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] = mps_memory;
  if (percent > 0) {
    env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] = std::to_string(percent);
    env["CUDA_DEVICE_SM_LIMIT"] = std::to_string(percent);
  }
  return env;
}

}  // namespace gapless::agent
