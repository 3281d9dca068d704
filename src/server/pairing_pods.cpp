// What the pod informer tells the pairing gate (server/pairing_waits.h, docs/node-pairing.md):
// an open pod closes when the device plugin marked it gapless.io/allocated, when its phase
// leaves Pending (the kubelet admitted it, or failed it), or when it is deleted; a bound, pending
// pod with an allocation record and no mark holds its classes (after a restart of the extender,
// or a pod another replica bound).
#include <nlohmann/json.hpp>
#include <set>

#include "gapless/k8s/allocation_record.h"
#include "gapless/k8s/device_asks.h"
#include "gapless/k8s/json_fields.h"
#include "gapless/server/extender.h"
#include "pairing_nodes.h"

namespace gapless::server {

namespace {

using k8s::field_path;
using k8s::string_field;

struct PairingFacts {
  std::string uid, name, node;
  bool deleting = false, started = false, allocated = false, recorded = false;
};

PairingFacts facts_of(const nlohmann::json& pod) {
  PairingFacts f;
  const nlohmann::json* meta = k8s::field(pod, "metadata");
  if (meta == nullptr || !meta->is_object()) return f;
  f.uid = string_field(*meta, "uid");
  f.name = string_field(*meta, "namespace") + "/" + string_field(*meta, "name");
  if (const nlohmann::json* spec = k8s::field(pod, "spec"); spec != nullptr && spec->is_object()) {
    f.node = string_field(*spec, "nodeName");
  }
  f.deleting = k8s::field(*meta, "deletionTimestamp") != nullptr;
  const nlohmann::json* phase = field_path(pod, {"status", "phase"});
  f.started = phase != nullptr && phase->is_string() && *phase != "Pending";
  f.allocated = k8s::marked_allocated(pod);
  f.recorded = field_path(pod, {"metadata", "annotations", k8s::kAllocationAnnotation}) != nullptr;
  return f;
}

}  // namespace

bool runs_gapless_plugin(const placement::Scheduler& scheduler, const std::string& node) {
  bool gated = false;
  scheduler.read([&](const model::Cluster& c) {
    const model::Node* n = c.find_node(node);
    gated = n != nullptr && n->gapless_device_plugin;
  });
  return gated;
}

void Extender::pairing_pod_event(const std::string& type, const nlohmann::json& pod) {
  if (!pairing_) return;
  const PairingFacts f = facts_of(pod);
  if (f.uid.empty()) return;
  using placement::CloseReason;
  if (type == "DELETED" || f.deleting) return pairing_->close(f.uid, CloseReason::kDeleted);
  if (f.allocated) return pairing_->close(f.uid, CloseReason::kAllocated);
  if (f.started) return pairing_->close(f.uid, CloseReason::kStarted);
  if (f.node.empty() || !f.recorded || !runs_gapless_plugin(scheduler_, f.node)) return;
  pairing_->note_bound(f.node, f.uid, f.name, k8s::device_classes(pod));
}

void Extender::pairing_pod_list(const std::vector<nlohmann::json>& pods) {
  if (!pairing_) return;
  std::set<std::string> listed;
  for (const auto& pod : pods) {
    pairing_pod_event("ADDED", pod);
    listed.insert(facts_of(pod).uid);
  }
  // Open pods the list no longer has were deleted (or finished) while the watch was down.
  for (const std::string& uid : pairing_->open_pods()) {
    if (!listed.contains(uid)) pairing_->close(uid, placement::CloseReason::kDeleted);
  }
}

}  // namespace gapless::server
