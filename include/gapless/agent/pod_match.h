// Which pod is the kubelet admitting? The device plugin API's Allocate names devices, never a
// pod, so the plugin infers it (README "What happens on the node"). The rule:
//
//   Among the pods bound to this node that are still Pending and not being deleted, take those
//   whose next container that asks for the resource (init containers first, then the others,
//   the order in which the kubelet allocates) has not been allocated yet (the checkpoint) and
//   asks for exactly as many devices as the kubelet is allocating. Of those, the one bound
//   first (the PodScheduled condition's time, then creationTimestamp, then namespace/name).
//
// The kubelet admits one pod at a time, in the order its pods arrive, which is bind order, so
// the oldest matching pod is the one being admitted; two pods bound back to back are told
// apart by their sizes or by that order, and a pod already allocated (checkpoint, kept across
// restarts) is never matched again. A pod without a record is a candidate like any other, so it
// cannot take a record pod's match: it gets what the kubelet chose (plain NVIDIA behaviour).
//
// Pure functions over the pod list's JSON; no I/O.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gapless/agent/allocation_checkpoint.h"
#include "gapless/model/allocation.h"
#include "gapless/model/result.h"

namespace gapless::agent {

// What the plugin hands out: whole GPUs (nvidia.com/gpu), shares of GPUs
// (gapless.io/gpu-shared-count, the record's grants with memoryMiB / computeMilli) or MIG
// instances (nvidia.com/mig-<profile>, the record's "mig" entries of that profile).
enum class GrantKind { kWhole, kShared, kMig };

inline constexpr std::string_view kMigResourcePrefix = "nvidia.com/mig-";

// "nvidia.com/mig-1g.10gb" -> "1g.10gb"; "" for any other resource.
std::string mig_profile_of(std::string_view resource);

// The container the kubelet is admitting, and its part of the pod's allocation record.
struct Admission {
  std::string pod_ns, pod_name, pod_uid, container;
  bool has_record = false;
  // With a record: this container's grants, in the record's order. Init containers each get
  // the record's first grants (they run before the others and give their devices back); the
  // other containers get consecutive grants, as the effective request (max of init, sum of
  // the rest) counted them.
  std::vector<model::GpuGrant> grants;
  std::vector<model::MigGrant> mig;  // kMig: this container's MIG instances, the same way
};

// The pod and container being admitted for `count` devices of `resource`, or nullopt when no
// pending pod on this node matches (the caller falls back to the kubelet's choice). Errors: a
// matched pod whose record cannot be decoded, names another node, or names fewer grants of
// `kind` than its containers ask for (the plugin must not guess GPUs for it).
Result<std::optional<Admission>> match_admission(const nlohmann::json& pod_list,
                                                 const std::string& node, std::string_view resource,
                                                 GrantKind kind, std::int64_t count,
                                                 const AllocationCheckpoint& checkpoint);

// One container's part of its pod's allocation record for one resource: what the plugin gives
// that container, split as match_admission splits it (init containers the record's first
// grants, the others consecutive ones). For the drift check (drift.h), which compares it with
// what the kubelet really assigned.
struct RecordPart {
  std::string container;
  bool init = false;
  std::int64_t count = 0;               // devices of the resource it asks for
  std::vector<model::GpuGrant> grants;  // kWhole, kShared
  std::vector<model::MigGrant> mig;     // kMig
  bool kubelet_choice = false;          // kMig counted without a placement: nothing to compare
  std::string error;                    // the record names fewer grants than it asks for
};

// Every container of `pod` (Kubernetes JSON) that asks for `resource`, in the kubelet's order,
// with its part of `record`.
std::vector<RecordPart> record_parts(const nlohmann::json& pod, const model::Allocation& record,
                                     std::string_view resource, GrantKind kind);

// The MIG instances that the records of this node's pods still name: every pod bound here that
// has not finished (Succeeded or Failed), being deleted or not (its containers may still run).
// Records that cannot be decoded are skipped.
std::vector<model::MigGrant> mig_in_use(const nlohmann::json& pod_list, const std::string& node);

}  // namespace gapless::agent
