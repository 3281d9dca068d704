// Per-pod GPU usage on the node and share over-use (docs/gpu-map.md).
//
// Each update reads NVML (gpu_usage.h), lists this node's pods from the API server, attributes
// every compute process to its pod and container (by pod UID from /proc/<pid>/cgroup, the
// container by its runtime ID in the pod's containerStatuses), and keeps the result for
// /metrics:
//   gapless_agent_gpu_utilization_ratio{gpu,uuid}            0..1, NVML's last sample
//   gapless_agent_gpu_memory_used_bytes{gpu,uuid}
//   gapless_agent_pod_gpu_memory_used_bytes{namespace,pod,container,gpu}
//   gapless_agent_gpu_memory_unattributed_bytes{gpu}        processes in no pod of this node
//   gapless_agent_share_overuse_containers                  (pod, GPU) pairs over their share now
//   gapless_agent_share_overuse_total                       over-use episodes begun
//
// Over-use: a pod whose allocation record grants it a share (memoryMiB) on a GPU, and whose
// processes on that GPU hold more than that. Each episode (from the first update that sees it
// to the first that does not) is counted once, gets one Warning Event on the pod (reason
// GaplessShareOveruse), and the pod carries the annotation gapless.io/share-overuse while it
// lasts ({"gpu":i,"usedMiB":u,"limitMiB":l} per GPU over, a JSON list), which the extender's
// GPU map shows. Pods without a record or with whole GPUs are never over.
//
// Thread-safety: update() from one thread; Collect() (the metrics server) from any.
#pragma once

#include <prometheus/collectable.h>

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json_fwd.hpp>
#include <set>
#include <string>
#include <vector>

#include "gapless/agent/gpu_usage.h"
#include "gapless/k8s/api_client.h"
#include "gapless/model/result.h"

namespace gapless::agent {

inline constexpr const char* kShareOveruseAnnotation = "gapless.io/share-overuse";
inline constexpr const char* kShareOveruseReason = "GaplessShareOveruse";

// One pod's (one container's) memory on one GPU.
struct PodGpuMemory {
  std::string ns, pod, uid, container;
  int gpu = 0;
  std::int64_t used_mib = 0;
};

struct Overuse {
  std::string ns, pod, uid, container;  // container: the one holding the most on that GPU
  int gpu = 0;
  std::int64_t used_mib = 0, limit_mib = 0;
};

struct UsageView {
  std::vector<GpuUsageSample> gpus;
  std::vector<PodGpuMemory> pods;            // by container
  std::map<int, std::int64_t> unattributed;  // GPU -> MiB held by processes in no known pod
  std::vector<Overuse> overuse;
};

// Pure: the samples attributed to `pod_list` (a PodList's JSON) through `cgroup_of`.
UsageView attribute_usage(std::vector<GpuUsageSample> gpus, const nlohmann::json& pod_list,
                          const std::function<std::optional<CgroupPod>(unsigned int)>& cgroup_of);

struct UsageOptions {
  std::string node_name;
  std::string proc_root = "/proc";
};

class UsageReporter : public prometheus::Collectable {
 public:
  // `api` may be null (no pod names, no Events); it must outlive the reporter.
  UsageReporter(UsageOptions options, k8s::ApiTransport* api,
                std::function<void(const std::string&)> log);

  // One pass over NVML and the pod list; Events and annotations for episodes that begin or end.
  Status update(const NvmlLibrary& nvml);

  std::vector<prometheus::MetricFamily> Collect() const override;

  std::uint64_t overuse_episodes() const;

 private:
  Result<nlohmann::json> list_pods() const;
  void post_event(const Overuse& o);
  void annotate(const std::string& ns, const std::string& pod, const std::string& value);
  void follow_episodes(const UsageView& view);

  UsageOptions options_;
  k8s::ApiTransport* api_;
  std::function<void(const std::string&)> log_;
  mutable std::mutex mu_;
  UsageView view_;
  std::uint64_t episodes_ = 0;
  std::map<std::string, std::string> annotated_;  // uid -> annotation value now on the pod
  std::map<std::string, std::pair<std::string, std::string>> names_;  // uid -> ns, name
  std::set<std::pair<std::string, int>> over_;                        // (uid, gpu) over now
};

}  // namespace gapless::agent
