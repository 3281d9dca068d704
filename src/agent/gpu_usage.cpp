#include "gapless/agent/gpu_usage.h"

#include <fstream>
#include <sstream>

namespace gapless::agent {

namespace {

constexpr std::int64_t kMiB = 1 << 20;

std::vector<ProcessMemory> processes_of(const NvmlFunctions& fn, nvmlDevice_t device,
                                        const std::function<void(const std::string&)>& error,
                                        int index) {
  std::vector<ProcessMemory> out;
  if (fn.compute_processes == nullptr) return out;
  // The list may grow between the two calls: ask again a few times with the new count.
  std::vector<nvmlProcessInfo_t> infos;
  for (int attempt = 0; attempt < 3; ++attempt) {
    unsigned int count = static_cast<unsigned int>(infos.size());
    const nvmlReturn_t r =
        fn.compute_processes(device, &count, infos.empty() ? nullptr : infos.data());
    if (r == NVML_SUCCESS) {
      infos.resize(count);
      for (const nvmlProcessInfo_t& p : infos) {
        const bool known = p.usedGpuMemory != NVML_VALUE_NOT_AVAILABLE;
        out.push_back({p.pid, known ? static_cast<std::int64_t>(p.usedGpuMemory / kMiB) : -1});
      }
      return out;
    }
    if (r != NVML_ERROR_INSUFFICIENT_SIZE) {
      if (r != NVML_ERROR_NOT_SUPPORTED && error) {
        error("nvmlDeviceGetComputeRunningProcesses on GPU " + std::to_string(index) + ": error " +
              std::to_string(r));
      }
      return out;
    }
    infos.resize(count + 4);  // room for a few that start meanwhile
  }
  return out;
}

}  // namespace

std::vector<GpuUsageSample> read_gpu_usage(const NvmlLibrary& nvml,
                                           const std::function<void(const std::string&)>& error) {
  const NvmlFunctions& fn = nvml.fn();
  std::vector<GpuUsageSample> out;
  unsigned int count = 0;
  if (fn.device_count(&count) != NVML_SUCCESS) return out;
  for (unsigned int i = 0; i < count; ++i) {
    nvmlDevice_t device = nullptr;
    if (fn.handle_by_index(i, &device) != NVML_SUCCESS) continue;  // the scan reports it
    GpuUsageSample s;
    s.index = static_cast<int>(i);
    char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
    if (fn.uuid(device, uuid, sizeof(uuid)) == NVML_SUCCESS) s.uuid = uuid;
    nvmlMemory_t memory{};
    if (fn.memory_info(device, &memory) == NVML_SUCCESS) {
      s.memory_used_mib = static_cast<std::int64_t>(memory.used / kMiB);
      s.memory_total_mib = static_cast<std::int64_t>(memory.total / kMiB);
    }
    nvmlUtilization_t util{};
    if (fn.utilization != nullptr && fn.utilization(device, &util) == NVML_SUCCESS) {
      s.utilization_percent = static_cast<int>(util.gpu);
    }
    s.processes = processes_of(fn, device, error, s.index);
    out.push_back(std::move(s));
  }
  return out;
}

namespace {

// "pod" followed by a UID in one path segment: the cgroupfs driver's "pod1f3c-…" or the systemd
// driver's "kubepods-besteffort-pod1f3c_….slice".
std::optional<std::string> uid_in_segment(std::string_view seg) {
  const std::size_t at = seg.rfind("pod");
  if (at == std::string_view::npos) return std::nullopt;
  std::string_view rest = seg.substr(at + 3);
  if (rest.size() > 6 && rest.substr(rest.size() - 6) == ".slice") rest.remove_suffix(6);
  if (rest.size() < 8 || rest.size() > 64) return std::nullopt;
  std::string uid;
  for (char c : rest) {
    const bool hex = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
    if (c == '_' || c == '-') {
      uid += '-';
    } else if (hex) {
      uid += c;
    } else {
      return std::nullopt;
    }
  }
  return uid;
}

// The container ID at the end of a path segment: "cri-containerd-<id>.scope", "docker-<id>.scope",
// "crio-<id>.scope" or the bare ID of cgroupfs.
std::string container_in_segment(std::string_view seg) {
  if (seg.size() > 6 && seg.substr(seg.size() - 6) == ".scope") seg.remove_suffix(6);
  if (const std::size_t dash = seg.rfind('-'); dash != std::string_view::npos) {
    seg = seg.substr(dash + 1);
  }
  if (seg.size() != 64) return "";
  for (char c : seg) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return "";
  }
  return std::string(seg);
}

}  // namespace

std::optional<CgroupPod> pod_of_cgroup(std::string_view text) {
  std::istringstream lines{std::string(text)};
  for (std::string line; std::getline(lines, line);) {
    // "hierarchy-ID:controllers:path"; v2 is "0::/path".
    const std::size_t colon = line.find(':', line.find(':') + 1);
    if (colon == std::string::npos) continue;
    const std::string path = line.substr(colon + 1);
    if (path.find("kubepods") == std::string::npos) continue;
    std::vector<std::string_view> segs;
    std::string_view rest(path);
    while (!rest.empty()) {
      const std::size_t slash = rest.find('/');
      if (slash != 0) segs.push_back(rest.substr(0, slash));
      if (slash == std::string_view::npos) break;
      rest.remove_prefix(slash + 1);
    }
    for (std::size_t i = 0; i < segs.size(); ++i) {
      auto uid = uid_in_segment(segs[i]);
      if (!uid) continue;
      CgroupPod out{*uid, ""};
      if (i + 1 < segs.size()) out.container_id = container_in_segment(segs[i + 1]);
      return out;
    }
  }
  return std::nullopt;
}

std::optional<CgroupPod> pod_of_pid(const std::string& proc_root, unsigned int pid) {
  std::ifstream in(proc_root + "/" + std::to_string(pid) + "/cgroup");
  if (!in) return std::nullopt;  // gone, or another PID namespace
  std::stringstream text;
  text << in.rdbuf();
  return pod_of_cgroup(text.str());
}

}  // namespace gapless::agent
