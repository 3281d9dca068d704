// A fake libnvidia-ml.so.1 for tests: the NVML subset of include/gapless/agent/nvml_api.h,
// answering from a scripted machine instead of a driver. Its MIG calls are in
// fake_nvml_mig.cpp, the state both files share in fake_nvml_state.h.
//
// nvmlInit_v2 reads the JSON file named by GAPLESS_FAKE_NVML_CONFIG (tests/fixtures/nvml/):
//   {"gpus": [{"name": "Tesla V100-SXM2-32GB", "uuid": "GPU-…", "memoryMiB": 32768,
//              "busId": "00000000:06:00.0", "numa": 0,
//              "nvlinks": ["00000000:07:00.0", …],   // remote PCI bus id of link 0, 1, …,
//                                  // or "switch": an NVSwitch port without remote PCI info
//              "mig": {"mode": 1, "instances": [{"profileId": 2, "start": 0, "size": 4}],
//                      "denied": false}}],   // true: MIG queries answer NO_PERMISSION
//              "utilization": {"gpu": 87, "memory": 40},   // optional, else NOT_SUPPORTED
//              "processes": [{"pid": 4242, "usedMiB": 20480}]},  // compute processes
//    "topology": [[0, 5, 50], …],   // common-ancestor level per pair; unlisted pairs: 50 (SYS)
//    "events": "/path/script"}      // optional; GAPLESS_FAKE_NVML_EVENTS wins
// A GPU without "numa" answers NOT_SUPPORTED there, one without "mig" NOT_SUPPORTED for MIG;
// one with "lost": true answers GPU_IS_LOST from the start.
// A missing or malformed file makes nvmlInit_v2 fail with NVML_ERROR_UNKNOWN.
//
// The events script is a text file tests append lines to; every call reads the new complete
// lines first:
//   xid <gpu> <xid>          an XID event for nvmlEventSetWait_v2 (only if the GPU is registered)
//   lost <gpu>               from now on every call about that GPU answers GPU_IS_LOST
//   linkdown <gpu> <link>    nvmlDeviceGetNvLinkState reports the link inactive
//   proc <gpu> <pid> <MiB>   the process now holds MiB on the GPU (0: it has ended)
//   util <gpu> <percent>     GPU utilization from now on
//
// Thread-safe: one mutex around everything. Handles point into the loaded config and stay
// valid until nvmlShutdown.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "fake_nvml_state.h"

namespace fake_nvml {

std::mutex mu;
Machine machine;

namespace {

void copy_string(const std::string& s, char* out, unsigned int length) {
  std::snprintf(out, length, "%s", s.c_str());
}

nvmlDevice_st parse_gpu(const json& g, unsigned int index) {
  nvmlDevice_st d;
  d.index = index;
  d.name = g.at("name").get<std::string>();
  d.uuid = g.at("uuid").get<std::string>();
  d.bus_id = g.at("busId").get<std::string>();
  d.memory_mib = g.at("memoryMiB").get<unsigned long long>();
  d.numa = g.contains("numa") ? g.at("numa").get<int>() : -1;
  d.lost = g.value("lost", false);
  if (g.contains("utilization")) {
    d.has_utilization = true;
    d.utilization.gpu = g.at("utilization").value("gpu", 0u);
    d.utilization.memory = g.at("utilization").value("memory", 0u);
  }
  for (const json& p : g.value("processes", json::array())) {
    d.processes.emplace_back(p.at("pid").get<unsigned int>(),
                             p.at("usedMiB").get<unsigned long long>());
  }
  if (g.contains("nvlinks")) d.nvlinks = g.at("nvlinks").get<std::vector<std::string>>();
  if (d.nvlinks.size() > NVML_NVLINK_MAX_LINKS) throw std::runtime_error("too many nvlinks");
  if (g.contains("mig")) {
    d.has_mig = true;
    const json& mig = g.at("mig");
    d.mig_mode = mig.value("mode", 0u);
    d.mig_denied = mig.value("denied", false);
    d.create_denied = mig.value("createDenied", false);
    for (const json& i : mig.value("instances", json::array())) {
      nvmlGpuInstance_st inst;
      inst.id = d.next_gi_id++;
      inst.profile_id = i.at("profileId").get<unsigned int>();
      inst.start = i.at("start").get<unsigned int>();
      inst.size = i.at("size").get<unsigned int>();
      if (inst.profile_id >= NVML_GPU_INSTANCE_PROFILE_COUNT) throw std::runtime_error("profile");
      d.instances.push_back(inst);
    }
  }
  return d;
}

bool load(Machine& m) {
  const char* path = std::getenv("GAPLESS_FAKE_NVML_CONFIG");
  if (path == nullptr) return false;
  std::ifstream in(path);
  json doc = json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object()) return false;
  try {
    for (const json& g : doc.at("gpus")) m.gpus.push_back(parse_gpu(g, m.gpus.size()));
    for (auto& d : m.gpus) {
      for (auto& i : d.instances) i.device = &d;
    }
    const std::size_t n = m.gpus.size();
    m.levels.assign(n, std::vector<int>(n, NVML_TOPOLOGY_SYSTEM));
    for (const json& t : doc.value("topology", json::array())) {
      auto a = t.at(0).get<std::size_t>(), b = t.at(1).get<std::size_t>();
      if (a >= n || b >= n) return false;
      m.levels[a][b] = m.levels[b][a] = t.at(2).get<int>();
    }
    m.script = doc.value("events", "");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fake NVML: %s: %s\n", path, e.what());
    return false;
  }
  if (const char* events = std::getenv("GAPLESS_FAKE_NVML_EVENTS")) m.script = events;
  return true;
}

// Applies the script lines appended since the last call. REQUIRES: mu held.
void read_script() {
  if (machine.script.empty()) return;
  std::ifstream in(machine.script, std::ios::binary);
  if (!in) return;
  in.seekg(static_cast<std::streamoff>(machine.script_offset));
  std::string line;
  while (std::getline(in, line)) {
    if (in.eof()) break;  // an incomplete last line: wait for its newline
    machine.script_offset += line.size() + 1;
    std::istringstream words(line);
    std::string verb;
    unsigned int gpu = 0;
    unsigned long long arg = 0;
    words >> verb >> gpu;
    if (!words || gpu >= machine.gpus.size()) continue;
    nvmlDevice_st& d = machine.gpus[gpu];
    if (verb == "lost") d.lost = true;
    if (verb == "xid" && (words >> arg) && d.registered) machine.xids.emplace_back(gpu, arg);
    if (verb == "linkdown" && (words >> arg)) d.links_down.insert(static_cast<unsigned int>(arg));
    if (verb == "util" && (words >> arg)) {
      d.has_utilization = true;
      d.utilization.gpu = static_cast<unsigned int>(arg);
    }
    unsigned long long mib = 0;
    if (verb == "proc" && (words >> arg >> mib)) {
      std::erase_if(d.processes, [&](const auto& p) { return p.first == arg; });
      if (mib > 0) d.processes.emplace_back(static_cast<unsigned int>(arg), mib);
    }
  }
}

}  // namespace

nvmlReturn_t check(nvmlDevice_t device) {
  if (!machine.initialized) return NVML_ERROR_UNINITIALIZED;
  if (device == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  read_script();
  return device->lost ? NVML_ERROR_GPU_IS_LOST : NVML_SUCCESS;
}

}  // namespace fake_nvml

using namespace fake_nvml;

FAKE_NVML_EXPORT nvmlReturn_t nvmlInit_v2(void) {
  std::lock_guard lock(mu);
  if (machine.initialized) {
    ++machine.init_count;
    return NVML_SUCCESS;
  }
  Machine fresh;
  if (!load(fresh)) return NVML_ERROR_UNKNOWN;
  machine.gpus = std::move(fresh.gpus);
  machine.levels = std::move(fresh.levels);
  machine.script = std::move(fresh.script);
  machine.script_offset = 0;
  machine.xids.clear();
  machine.mig_devices.clear();
  machine.mig_serial = 0;
  machine.created = machine.destroyed = 0;
  // An operator's instances come with their compute instance, as `nvidia-smi mig -cgi … -C`.
  for (auto& d : machine.gpus) {
    for (auto& gi : d.instances) {
      add_compute(gi, kSliceCount[gi.profile_id], ci_profile_of(kSliceCount[gi.profile_id]));
    }
  }
  machine.init_count = 1;
  machine.initialized = true;
  // Events scripted before start-up are history, as a real driver would not replay them.
  if (!machine.script.empty()) {
    std::ifstream in(machine.script, std::ios::binary | std::ios::ate);
    if (in) machine.script_offset = static_cast<std::size_t>(in.tellg());
  }
  return NVML_SUCCESS;
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlShutdown(void) {
  std::lock_guard lock(mu);
  if (!machine.initialized) return NVML_ERROR_UNINITIALIZED;
  if (--machine.init_count > 0) return NVML_SUCCESS;
  machine.initialized = false;
  machine.gpus.clear();
  return NVML_SUCCESS;
}

FAKE_NVML_EXPORT const char* nvmlErrorString(nvmlReturn_t result) {
  switch (result) {
    case NVML_SUCCESS:
      return "Success";
    case NVML_ERROR_NOT_SUPPORTED:
      return "Not Supported";
    case NVML_ERROR_GPU_IS_LOST:
      return "GPU is lost";
    case NVML_ERROR_TIMEOUT:
      return "Timeout";
    case NVML_ERROR_NO_PERMISSION:
      return "Insufficient Permissions";
    case NVML_ERROR_INSUFFICIENT_RESOURCES:
      return "Insufficient Resources";
    case NVML_ERROR_IN_USE:
      return "In use by another client";
    default:
      return "Unknown Error";
  }
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* count) {
  std::lock_guard lock(mu);
  if (!machine.initialized) return NVML_ERROR_UNINITIALIZED;
  if (count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *count = static_cast<unsigned int>(machine.gpus.size());
  return NVML_SUCCESS;
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index,
                                                            nvmlDevice_t* device) {
  std::lock_guard lock(mu);
  if (!machine.initialized) return NVML_ERROR_UNINITIALIZED;
  if (device == nullptr || index >= machine.gpus.size()) return NVML_ERROR_INVALID_ARGUMENT;
  read_script();
  if (machine.gpus[index].lost) return NVML_ERROR_GPU_IS_LOST;
  *device = &machine.gpus[index];
  return NVML_SUCCESS;
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char* uuid,
                                                unsigned int length) {
  DEVICE_CALL;
  if (uuid == nullptr || length <= device->uuid.size()) return NVML_ERROR_INSUFFICIENT_SIZE;
  copy_string(device->uuid, uuid, length);
  return NVML_SUCCESS;
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char* name,
                                                unsigned int length) {
  DEVICE_CALL;
  if (name == nullptr || length <= device->name.size()) return NVML_ERROR_INSUFFICIENT_SIZE;
  copy_string(device->name, name, length);
  return NVML_SUCCESS;
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t* memory) {
  DEVICE_CALL;
  if (memory == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  memory->total = device->memory_mib << 20;
  memory->used = 0;
  for (const auto& [pid, mib] : device->processes) memory->used += mib << 20;
  memory->free = memory->total - std::min(memory->total, memory->used);
  return NVML_SUCCESS;
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t* pci) {
  DEVICE_CALL;
  if (pci == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *pci = nvmlPciInfo_t{};
  copy_string(device->bus_id, pci->busId, sizeof pci->busId);
  return NVML_SUCCESS;
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetNumaNodeId(nvmlDevice_t device, unsigned int* node) {
  DEVICE_CALL;
  if (device->numa < 0) return NVML_ERROR_NOT_SUPPORTED;
  *node = static_cast<unsigned int>(device->numa);
  return NVML_SUCCESS;
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetTopologyCommonAncestor(nvmlDevice_t device,
                                                                  nvmlDevice_t other,
                                                                  nvmlGpuTopologyLevel_t* level) {
  DEVICE_CALL;
  if (nvmlReturn_t r = check(other); r != NVML_SUCCESS) return r;
  *level = static_cast<nvmlGpuTopologyLevel_t>(machine.levels[device->index][other->index]);
  return NVML_SUCCESS;
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t device, unsigned int link,
                                                       nvmlEnableState_t* is_active) {
  DEVICE_CALL;
  if (link >= NVML_NVLINK_MAX_LINKS) return NVML_ERROR_INVALID_ARGUMENT;
  if (link >= device->nvlinks.size()) return NVML_ERROR_NOT_SUPPORTED;
  *is_active = device->links_down.count(link) ? NVML_FEATURE_DISABLED : NVML_FEATURE_ENABLED;
  return NVML_SUCCESS;
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t device,
                                                                  unsigned int link,
                                                                  nvmlPciInfo_t* pci) {
  DEVICE_CALL;
  if (link >= NVML_NVLINK_MAX_LINKS) return NVML_ERROR_INVALID_ARGUMENT;
  if (link >= device->nvlinks.size() || device->nvlinks[link] == "switch") {
    return NVML_ERROR_NOT_SUPPORTED;
  }
  *pci = nvmlPciInfo_t{};
  copy_string(device->nvlinks[link], pci->busId, sizeof pci->busId);
  return NVML_SUCCESS;
}

// A link to a GPU's bus id ends in a GPU; anything else ends in a switch.
FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetNvLinkRemoteDeviceType(nvmlDevice_t device,
                                                                  unsigned int link,
                                                                  nvmlIntNvLinkDeviceType_t* type) {
  DEVICE_CALL;
  if (link >= NVML_NVLINK_MAX_LINKS) return NVML_ERROR_INVALID_ARGUMENT;
  if (link >= device->nvlinks.size()) return NVML_ERROR_NOT_SUPPORTED;
  *type = NVML_NVLINK_DEVICE_TYPE_SWITCH;
  for (const nvmlDevice_st& d : machine.gpus) {
    if (d.bus_id == device->nvlinks[link]) *type = NVML_NVLINK_DEVICE_TYPE_GPU;
  }
  return NVML_SUCCESS;
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t* set) {
  std::lock_guard lock(mu);
  if (!machine.initialized) return NVML_ERROR_UNINITIALIZED;
  *set = &machine.event_set;
  return NVML_SUCCESS;
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t device,
                                                       unsigned long long types, nvmlEventSet_t) {
  DEVICE_CALL;
  if ((types & nvmlEventTypeXidCriticalError) == 0) return NVML_ERROR_NOT_SUPPORTED;
  device->registered = true;
  return NVML_SUCCESS;
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t, nvmlEventData_t* data,
                                                  unsigned int timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    {
      std::lock_guard lock(mu);
      if (!machine.initialized) return NVML_ERROR_UNINITIALIZED;
      read_script();
      if (!machine.xids.empty()) {
        auto [gpu, xid] = machine.xids.front();
        machine.xids.pop_front();
        *data = nvmlEventData_t{};
        data->device = &machine.gpus[gpu];
        data->eventType = nvmlEventTypeXidCriticalError;
        data->eventData = xid;
        return NVML_SUCCESS;
      }
    }
    if (std::chrono::steady_clock::now() >= deadline) return NVML_ERROR_TIMEOUT;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t) {
  return NVML_SUCCESS;
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device,
                                                            nvmlUtilization_t* utilization) {
  DEVICE_CALL;
  if (utilization == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (!device->has_utilization) return NVML_ERROR_NOT_SUPPORTED;
  *utilization = device->utilization;
  return NVML_SUCCESS;
}

// As NVML documents: with too small a buffer, INSUFFICIENT_SIZE and the count needed.
FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device,
                                                                      unsigned int* count,
                                                                      nvmlProcessInfo_t* infos) {
  DEVICE_CALL;
  if (count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  const auto have = static_cast<unsigned int>(device->processes.size());
  if (*count < have || (have > 0 && infos == nullptr)) {
    *count = have;
    return NVML_ERROR_INSUFFICIENT_SIZE;
  }
  *count = have;
  for (unsigned int i = 0; i < have; ++i) {
    infos[i] = {device->processes[i].first, device->processes[i].second << 20, 0xFFFFFFFFu,
                0xFFFFFFFFu};
  }
  return NVML_SUCCESS;
}

// Every export has the signature the agent's typedef says.
static_assert(std::is_same_v<decltype(&nvmlInit_v2), nvmlInit_v2_fn>);
static_assert(std::is_same_v<decltype(&nvmlErrorString), nvmlErrorString_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetCount_v2), nvmlDeviceGetCount_v2_fn>);
static_assert(
    std::is_same_v<decltype(&nvmlDeviceGetHandleByIndex_v2), nvmlDeviceGetHandleByIndex_v2_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetUUID), nvmlDeviceGetUUID_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetPciInfo_v3), nvmlDeviceGetPciInfo_v3_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetTopologyCommonAncestor),
                             nvmlDeviceGetTopologyCommonAncestor_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetNvLinkRemotePciInfo_v2),
                             nvmlDeviceGetNvLinkRemotePciInfo_v2_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetNvLinkRemoteDeviceType),
                             nvmlDeviceGetNvLinkRemoteDeviceType_fn>);
static_assert(std::is_same_v<decltype(&nvmlEventSetWait_v2), nvmlEventSetWait_v2_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceRegisterEvents), nvmlDeviceRegisterEvents_fn>);
