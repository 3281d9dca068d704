// A client of the kubelet's PodResources API (v1, gRPC over the Unix socket
// <kubelet root>/pod-resources/kubelet.sock): which device IDs the kubelet assigned to which
// container. The kubelet answers from its device manager's state, which it checkpoints, so the
// answer after a kubelet restart is the assignment made before it.
//
// Thread-safety: list() may be called from any thread (each call opens its own connection).
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "gapless/model/result.h"

namespace gapless::agent {

inline constexpr const char* kPodResourcesSocket = "/var/lib/kubelet/pod-resources/kubelet.sock";

// One ContainerDevices entry: devices of one resource the kubelet assigned to one container, as
// the device plugin reported their IDs. Kept as the kubelet sends them: a v1.26 kubelet sends
// one entry per device (one ID each, repeated per NUMA node of the device), so a container may
// have several entries of one resource; readers take their union (drift.cpp).
struct AssignedDevices {
  std::string resource;
  std::vector<std::string> ids;
  bool operator==(const AssignedDevices&) const = default;
};

struct AssignedContainer {
  std::string name;
  std::vector<AssignedDevices> devices;
  bool operator==(const AssignedContainer&) const = default;
};

struct AssignedPod {
  std::string ns, name;
  std::vector<AssignedContainer> containers;
  bool operator==(const AssignedPod&) const = default;
};

class PodResourcesClient {
 public:
  // `socket`: the file path of the kubelet's socket. Each call gives up after `deadline`.
  explicit PodResourcesClient(std::string socket,
                              std::chrono::milliseconds deadline = std::chrono::seconds(5));

  const std::string& socket() const { return socket_; }

  // List: every pod the kubelet knows and, per container, the devices it holds. Containers and
  // resources without devices are kept (an empty list), so "holds nothing" is visible.
  // Errors: the socket does not answer within the deadline, or the call fails.
  Result<std::vector<AssignedPod>> list() const;

 private:
  std::string socket_;
  std::chrono::milliseconds deadline_;
};

}  // namespace gapless::agent
