// Which pod is the kubelet admitting? The device plugin API's Allocate names devices, never a
// pod, so the plugin infers it (docs/node-pairing.md). The rule:
//
//   The candidates are the pods on this node that are Pending, not being deleted, not marked
//   gapless.io/allocated, and whose next container asking the resource (init containers first,
//   then the others: the kubelet's order) has not been served (the checkpoint) and asks for
//   exactly as many devices as the kubelet is allocating. Exactly one candidate: that pod.
//   None: the kubelet's choice (a pod nobody matched). Several: no guessing; Allocate fails
//   naming them (the kubelet fails that pod's admission), unless none of them has a record,
//   when the container gets the kubelet's choice, which is the same whoever it is for.
//
// No times are compared: the kubelet sorts each batch of pods by creationTimestamp at
// one-second resolution with an unstable sort, so no order the plugin can see is the kubelet's.
// The extender's bind gate (placement/pairing_gate.h) keeps at most one pod per pairing class
// open per node, so for the pods Gapless binds there is one candidate. Pods of other schedulers
// asking the same (resource, count) on the same node at the same moment are the limit.
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
  // The pod's last container asking the resource: once served, the pod is fully served.
  bool last = false;
  // The record's first grants, which the pod's init containers held: the kubelet hands them to
  // later containers first (devicesToReuse), in any order. Empty when no init container asks.
  std::vector<model::GpuGrant> reusable;
  std::vector<model::MigGrant> reusable_mig;
  // With a record: this container's grants, in the record's order. Init containers each get
  // the record's first grants (they run before the others and give their devices back); the
  // other containers get consecutive grants, as the effective request (max of init, sum of
  // the rest) counted them.
  std::vector<model::GpuGrant> grants;
  std::vector<model::MigGrant> mig;  // kMig: this container's MIG instances, the same way
  // kMig: the GPU UUID the record gives each of `mig` (and of `reusable_mig`), "" when the
  // record predates them; a UUID wins over the index, which a reboot may renumber.
  std::vector<std::string> mig_uuids, reusable_mig_uuids;
};

// The pod and container being admitted for `count` devices of `resource`, or nullopt when no
// pending pod on this node matches, or several without a record (the caller falls back to the
// kubelet's choice). Errors: several candidates, one with a record (the message names them:
// "cannot tell which pod ..."); a matched pod whose record cannot be decoded, names another
// node, or names fewer grants of `kind` than its containers ask for (no guessing GPUs).
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
