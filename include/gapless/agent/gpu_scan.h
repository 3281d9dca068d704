// What NVML says about the GPUs of this node, read into plain values: per GPU its identity,
// memory, NUMA node, MIG layout and health; per pair its NVLink lanes or PCIe path.
//
// Ownership: a GpuScanner borrows the NvmlLibrary, which must outlive it.
// Thread-safety: none; one thread scans (the agent's loop).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "gapless/agent/nvml_library.h"
#include "gapless/model/mig.h"
#include "gapless/model/result.h"
#include "gapless/model/topology.h"

namespace gapless::agent {

struct GpuState {
  int index = 0;
  std::string uuid;
  std::string model;  // NVML's product name with spaces as '-': "NVIDIA-H100-80GB-HBM3"
  std::int64_t memory_mib = 0;
  int numa = -1;  // -1: unknown (driver without nvmlDeviceGetNumaNodeId)
  bool healthy = true;
  bool mig_enabled = false;
  std::vector<model::MigInstance> mig_instances;  // by start
  std::string bus_id;                             // normalised PCI bus id, "0:10:00.0"
};

struct GpuPair {
  int a = 0, b = 0;       // a < b
  int nvlink_lanes = 0;   // active lanes now (direct, or through NVSwitch)
  bool degraded = false;  // fewer active lanes than this agent has seen on the pair
  model::PciePath path = model::PciePath::kSYS;  // the PCIe path, for pairs without lanes
};

struct NodeGpus {
  std::vector<GpuState> gpus;  // by index
  std::vector<GpuPair> pairs;  // every pair once, sorted by (a, b)
};

// Called with a sentence for every NVML call that failed unexpectedly (metrics and logs).
using NvmlErrorSink = std::function<void(const std::string& message)>;

// "0000:07:00.0" and "00000000:07:00.0" -> "0:07:00.0" (lower case), so bus ids from different
// calls compare equal.
std::string normalise_bus_id(const std::string& bus_id);

// "NVIDIA H100 80GB HBM3" -> "NVIDIA-H100-80GB-HBM3" (the contract's model words).
std::string model_name(const std::string& nvml_name);

class GpuScanner {
 public:
  GpuScanner(const NvmlLibrary& nvml, NvmlErrorSink on_error);

  // Reads every GPU and pair. Errors only when the GPU count cannot be read. A GPU whose calls
  // fail (GPU_IS_LOST, ...) is kept with what the last scan knew and healthy = false; one never
  // read is reported as model "unknown", 1 MiB, unhealthy, so indices stay dense.
  // NVLink lanes: a lane whose remote bus id is another GPU's counts for that pair; lanes the
  // driver says end in a switch, or whose far end is no GPU of this node, are NVSwitch ports,
  // and two GPUs with switch ports reach each other over min(ports of a, ports of b) lanes
  // (all switches of a node form one fabric on DGX/HGX).
  Result<NodeGpus> scan();

  // Marks GPU `index` unhealthy until the agent restarts (a critical XID: the GPU needs a
  // reset, and a reset means draining the node, which restarts the agent's pod too).
  void mark_unhealthy(int index) { sticky_unhealthy_.insert(index); }

 private:
  bool read_gpu(int index, GpuState* out, nvmlDevice_t* handle);
  void read_mig(nvmlDevice_t dev, GpuState* gpu);
  void read_instances(nvmlDevice_t dev, unsigned int profile_id,
                      const nvmlGpuInstanceProfileInfo_t& info, model::MigFamily family,
                      GpuState* gpu);
  std::vector<GpuPair> read_pairs(const std::vector<nvmlDevice_t>& devs,
                                  const std::vector<GpuState>& gpus);
  // One GPU's active lanes: per remote bus id, and into NVSwitch ports.
  struct Lanes {
    std::map<std::string, int> by_bus;
    int switch_ports = 0;
  };
  Lanes read_lanes(nvmlDevice_t dev);
  bool failed(nvmlReturn_t r, const std::string& what);

  const NvmlLibrary& nvml_;
  NvmlErrorSink on_error_;
  std::vector<GpuState> last_;
  std::set<int> sticky_unhealthy_;
  std::map<std::pair<int, int>, int> most_lanes_;  // per pair, the most lanes ever seen
};

}  // namespace gapless::agent
