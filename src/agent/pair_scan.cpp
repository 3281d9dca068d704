// GpuScanner: NVLink lanes and PCIe paths between every pair of GPUs.
#include <algorithm>

#include "gapless/agent/gpu_scan.h"

namespace gapless::agent {

namespace {

model::PciePath path_of(nvmlGpuTopologyLevel_t level) {
  switch (level) {
    case NVML_TOPOLOGY_INTERNAL:  // two GPUs on one board
    case NVML_TOPOLOGY_SINGLE:
      return model::PciePath::kPIX;
    case NVML_TOPOLOGY_MULTIPLE:
      return model::PciePath::kPXB;
    case NVML_TOPOLOGY_HOSTBRIDGE:
      return model::PciePath::kPHB;
    case NVML_TOPOLOGY_NODE:
      return model::PciePath::kNODE;
    default:
      return model::PciePath::kSYS;
  }
}

}  // namespace

GpuScanner::Lanes GpuScanner::read_lanes(nvmlDevice_t dev) {
  const NvmlFunctions& f = nvml_.fn();
  Lanes lanes;
  if (f.nvlink_state == nullptr || f.nvlink_remote_pci == nullptr) return lanes;
  for (unsigned int link = 0; link < NVML_NVLINK_MAX_LINKS; ++link) {
    nvmlEnableState_t active = NVML_FEATURE_DISABLED;
    nvmlReturn_t r = f.nvlink_state(dev, link, &active);
    // GPUs have fewer links than the API numbers; the others answer NOT_SUPPORTED.
    if (r == NVML_ERROR_NOT_SUPPORTED || r == NVML_ERROR_INVALID_ARGUMENT) continue;
    if (failed(r, "NVLink " + std::to_string(link) + " state") || active != NVML_FEATURE_ENABLED) {
      continue;
    }
    nvmlIntNvLinkDeviceType_t type = NVML_NVLINK_DEVICE_TYPE_UNKNOWN;
    if (f.nvlink_remote_type != nullptr && f.nvlink_remote_type(dev, link, &type) == NVML_SUCCESS &&
        type == NVML_NVLINK_DEVICE_TYPE_SWITCH) {
      ++lanes.switch_ports;
      continue;
    }
    nvmlPciInfo_t remote{};
    if (failed(f.nvlink_remote_pci(dev, link, &remote),
               "NVLink " + std::to_string(link) + " peer")) {
      continue;
    }
    ++lanes.by_bus[normalise_bus_id(remote.busId)];
  }
  return lanes;
}

std::vector<GpuPair> GpuScanner::read_pairs(const std::vector<nvmlDevice_t>& devs,
                                            const std::vector<GpuState>& gpus) {
  const int n = static_cast<int>(gpus.size());
  std::map<std::string, int> gpu_at_bus;
  for (int i = 0; i < n; ++i) {
    if (devs[i] != nullptr) gpu_at_bus[gpus[i].bus_id] = i;
  }
  // direct[i][j]: lanes i sees to j; switch_ports[i]: lanes i has into NVSwitches.
  std::vector<std::vector<int>> direct(n, std::vector<int>(n, 0));
  std::vector<int> switch_ports(n, 0);
  for (int i = 0; i < n; ++i) {
    if (devs[i] == nullptr) continue;
    const Lanes lanes = read_lanes(devs[i]);
    switch_ports[i] = lanes.switch_ports;
    for (const auto& [bus, count] : lanes.by_bus) {
      auto peer = gpu_at_bus.find(bus);
      if (peer == gpu_at_bus.end()) {
        switch_ports[i] += count;
      } else if (peer->second != i) {
        direct[i][peer->second] += count;
      }
    }
  }
  std::vector<GpuPair> pairs;
  const NvmlFunctions& f = nvml_.fn();
  for (int a = 0; a < n; ++a) {
    for (int b = a + 1; b < n; ++b) {
      GpuPair p;
      p.a = a;
      p.b = b;
      // Both ends must see a lane for it to carry traffic.
      p.nvlink_lanes =
          std::min(direct[a][b], direct[b][a]) + std::min(switch_ports[a], switch_ports[b]);
      int& most = most_lanes_[{a, b}];
      most = std::max(most, p.nvlink_lanes);
      p.degraded = p.nvlink_lanes < most;
      nvmlGpuTopologyLevel_t level = NVML_TOPOLOGY_SYSTEM;
      if (devs[a] != nullptr && devs[b] != nullptr &&
          !failed(f.common_ancestor(devs[a], devs[b], &level),
                  "PCIe path " + std::to_string(a) + "-" + std::to_string(b))) {
        p.path = path_of(level);
      }
      pairs.push_back(p);
    }
  }
  return pairs;
}

}  // namespace gapless::agent
