// What a pod asks of the GPU side, already parsed and validated (the k8s layer turns a Pod object
// into this; the bench builds it from trace rows). Exactly one kind per pod.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "gapless/model/allocation.h"
#include "gapless/model/host.h"

namespace gapless::model {

enum class RequestKind {
  kNone,      // no GPU resource: the extender passes every node
  kWhole,     // nvidia.com/gpu: N
  kShared,    // gapless.io/gpu-memory / gpu-compute on K GPUs
  kMig,       // nvidia.com/mig-<profile>: N
  kGpushare,  // aliyun.com/gpu-mem: G on one GPU
};

enum class TopologyWish {
  kNone,             // connectivity does not matter
  kNvlinkPreferred,  // better connected sets score higher (default for N >= 2)
  kNvlinkRequired,   // every pair in the set must be NVLink-connected, or the node fails
};

struct SharedAsk {
  std::int64_t memory_mib = 0;  // on each shared GPU; 0 = no memory bound
  int compute_milli = 0;        // on each shared GPU, 1..1000; 0 = no compute bound
  int count = 1;                // number of GPUs
  bool operator==(const SharedAsk&) const = default;
};

struct GpuRequest {
  RequestKind kind = RequestKind::kNone;
  int whole = 0;                    // kWhole
  SharedAsk shared;                 // kShared
  std::string mig_profile;          // kMig: profile name without "nvidia.com/mig-"
  int mig_count = 0;                // kMig
  std::int64_t gpushare_units = 0;  // kGpushare
  std::vector<std::string> models;  // allowed GPU models; empty = any
  TopologyWish topology = TopologyWish::kNone;
  // CPU and memory the pod asks for, checked only against nodes that track them (Node::host).
  // The extender leaves this at zero; kube-scheduler checks host resources itself.
  HostResources host;

  // Number of GPUs this request lands on (whole, shared) or instances (MIG); 1 for gpushare.
  int units() const;
  bool operator==(const GpuRequest&) const = default;
};

// Hashes every field operator== compares, so equal requests hash alike (caches and tallies keyed
// by request shape).
struct GpuRequestHash {
  std::size_t operator()(const GpuRequest& r) const;
};

// The pod facts policy selection and allocation records need, independent of Kubernetes types.
struct PodInfo {
  std::string ns;
  std::string name;
  std::string uid;
  std::string priority_class;
  // spec.priority (resolved from the PriorityClass by admission); 0 when absent, as Kubernetes
  // treats a pod without one. Preemption evicts only pods of lower priority.
  std::int32_t priority = 0;
  std::map<std::string, std::string> labels;
  std::string policy;  // gapless.io/policy annotation, empty when absent
  std::string node;    // spec.nodeName, empty while pending
  // Whether consolidation may move the pod (model/allocation.h's Movability): the driver decides
  // from the pod's annotation, owner and namespace.
  Movability movable = Movability::kNever;
  // When the pod started (Kubernetes: status.startTime), in seconds since the Unix epoch; -1
  // while unknown (pending, or never said). Consolidation counts the GPU-time a move loses.
  std::int64_t started_unix_s = -1;
};

}  // namespace gapless::model
