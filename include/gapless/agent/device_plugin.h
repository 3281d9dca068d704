// The kubelet device plugin (API v1beta1, gRPC over a Unix socket in the kubelet's device
// plugin directory) that makes the GPUs Gapless chose the GPUs the container gets.
//
// One DevicePlugin serves one resource:
//   - whole GPUs: `nvidia.com/gpu`, one device per GPU, its ID the GPU's UUID (this replaces
//     NVIDIA's device plugin on nodes that run Gapless: two plugins cannot serve one resource);
//   - shares: `gapless.io/gpu-shared-count`, `share_slots` devices per GPU, IDs "<UUID>::<k>",
//     so that the kubelet calls the plugin for share pods (they ask for gpu-shared-count);
//   - MIG: `nvidia.com/mig-<profile>`, one device per placement a record may name, IDs
//     "<UUID>::slice-<start>": on a GPU without instances of its own (reconfigurable: the
//     instances the agent created are hidden from the scans) every start the profile allows, on
//     a GPU with an operator's layout its instances of that profile. Allocate ensures the
//     record's instance exists (mig_instances.h) and gives the container its MIG device.
// MIG-enabled GPUs serve only MIG resources.
// Allocate matches the pod being admitted (pod_match.h) through the API server, gives the
// container exactly the devices of its allocation record (NVIDIA_VISIBLE_DEVICES, read by the
// NVIDIA container runtime) plus, for shares, the MPS and HAMi-core limits, and checkpoints
// what it gave (allocation_checkpoint.h). GetPreferredAllocation steers the kubelet to the same
// devices, so the kubelet's own accounting agrees. A pod without a record gets the devices the
// kubelet chose. ListAndWatch reports each GPU's health from the agent's scans: an unhealthy
// GPU's devices are Unhealthy, and Allocate never hands one out.
//
// Registration: once its socket listens, the plugin registers with the kubelet's Registration
// service (kubelet.sock). A restarting kubelet deletes the plugin sockets and creates a new
// kubelet.sock; a watch thread notices either, re-creates the socket and registers again.
//
// Ownership: borrows the API transport (must outlive the plugin); owns its gRPC server and
// threads. Thread-safety: set_gpus may be called from any thread, start/stop from one.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "gapless/agent/gpu_scan.h"
#include "gapless/agent/mig_instances.h"
#include "gapless/k8s/api_client.h"
#include "gapless/model/result.h"

namespace gapless::agent {

inline constexpr const char* kDevicePluginDir = "/var/lib/kubelet/device-plugins";
inline constexpr const char* kWholeGpuResource = "nvidia.com/gpu";
inline constexpr const char* kSharedGpuResource = "gapless.io/gpu-shared-count";

struct DevicePluginOptions {
  std::string plugin_dir = kDevicePluginDir;
  std::string node_name;
  std::string resource = kWholeGpuResource;
  int share_slots = 0;  // 0: whole GPUs; N > 0: N shared devices per GPU
  // Required for a MIG resource (borrowed, must outlive the plugin); unused otherwise.
  MigInstances* mig = nullptr;
  // How often the watch thread checks for a restarted kubelet (or a failed registration).
  std::chrono::milliseconds recheck{1000};
  // Called (from the watch thread) after each successful registration with the kubelet.
  std::function<void()> on_registered;
};

// "nvidia.com/gpu" -> "gapless-nvidia.com-gpu.sock": the plugin's socket in the plugin dir.
std::string plugin_socket_name(const std::string& resource);

class DevicePlugin {
 public:
  DevicePlugin(DevicePluginOptions options, k8s::ApiTransport& api,
               std::function<void(const std::string&)> log);
  ~DevicePlugin();  // stops
  DevicePlugin(const DevicePlugin&) = delete;
  DevicePlugin& operator=(const DevicePlugin&) = delete;

  // Loads the checkpoint, listens on the socket and starts the watch thread, which registers
  // (and re-registers) with the kubelet. Errors: the socket cannot be served.
  Status start();
  void stop();

  // The GPUs of the latest scan: the devices ListAndWatch reports and their health.
  void set_gpus(const std::vector<GpuState>& gpus);

  int registrations() const;  // successful Register calls so far
  const std::string& resource() const;
  std::string socket_path() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The value of the gapless.io/device-plugin annotation (k8s::kDevicePluginAnnotation) for these
// plugins: the resources of those registered with the kubelet so far, comma-separated, in order;
// empty when none is (the annotation is then removed). The extender gates binds only on nodes
// that carry it (docs/node-pairing.md).
std::string registered_resources(const std::vector<std::unique_ptr<DevicePlugin>>& plugins);

}  // namespace gapless::agent
