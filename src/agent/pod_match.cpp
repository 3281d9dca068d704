#include "gapless/agent/pod_match.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <tuple>

#include "gapless/k8s/allocation_record.h"
#include "gapless/k8s/json_fields.h"

namespace gapless::agent {

namespace {

using k8s::field;
using k8s::field_path;
using k8s::string_field;

// One container that asks for the resource, in the kubelet's allocation order.
struct Asking {
  std::string name;
  std::int64_t count = 0;
  bool init = false;
};

std::int64_t asks_for(const nlohmann::json& container, std::string_view resource) {
  // Extended resources must have limits == requests; limits is where the API puts them first.
  for (const char* where : {"limits", "requests"}) {
    const nlohmann::json* q = field_path(container, {"resources", where, resource});
    if (q == nullptr) continue;
    auto n = k8s::quantity_value(*q);
    return n.ok() ? *n : 0;
  }
  return 0;
}

std::vector<Asking> asking_containers(const nlohmann::json& pod, std::string_view resource) {
  std::vector<Asking> out;
  for (const auto& [key, init] : {std::pair{"initContainers", true}, {"containers", false}}) {
    const nlohmann::json* list = field_path(pod, {"spec", key});
    if (list == nullptr || !list->is_array()) continue;
    for (const auto& c : *list) {
      const std::int64_t n = asks_for(c, resource);
      if (n > 0) out.push_back({string_field(c, "name"), n, init});
    }
  }
  return out;
}

// Whether the pod is waiting for the kubelet: bound, Pending, not being deleted.
bool admissible(const nlohmann::json& pod) {
  const nlohmann::json* phase = field_path(pod, {"status", "phase"});
  if (phase != nullptr && *phase != "Pending") return false;
  return field_path(pod, {"metadata", "deletionTimestamp"}) == nullptr;
}

// The time the pod was bound: the apiserver sets PodScheduled=True when it accepts the Binding.
std::string bind_time(const nlohmann::json& pod) {
  const nlohmann::json* conditions = field_path(pod, {"status", "conditions"});
  if (conditions != nullptr && conditions->is_array()) {
    for (const auto& c : *conditions) {
      if (string_field(c, "type") == "PodScheduled" && string_field(c, "status") == "True") {
        return string_field(c, "lastTransitionTime");
      }
    }
  }
  return "";
}

struct Candidate {
  const nlohmann::json* pod = nullptr;
  Asking container;
  std::int64_t offset = 0;  // grants taken by the containers before it (0 for init ones)
  // Sort key: bind time (creation time when unknown), creation time, namespace/name. RFC 3339
  // times in UTC with the same precision compare as strings.
  std::tuple<std::string, std::string, std::string, std::string> key;
};

std::optional<Candidate> candidate(const nlohmann::json& pod, std::string_view resource,
                                   std::int64_t count, const AllocationCheckpoint& checkpoint) {
  if (!admissible(pod)) return std::nullopt;
  const std::string uid = string_field(pod["metadata"], "uid");
  std::int64_t offset = 0;
  for (const Asking& c : asking_containers(pod, resource)) {
    if (!checkpoint.contains(uid, c.name)) {
      if (c.count != count) return std::nullopt;
      const auto& meta = pod["metadata"];
      const std::string created = string_field(meta, "creationTimestamp");
      const std::string bound = bind_time(pod);
      return Candidate{&pod,
                       c,
                       c.init ? 0 : offset,
                       {bound.empty() ? created : bound, created, string_field(meta, "namespace"),
                        string_field(meta, "name")}};
    }
    if (!c.init) offset += c.count;
  }
  return std::nullopt;  // every container that asks is served already
}

bool is_kind(const model::GpuGrant& g, GrantKind kind) {
  if (g.gpushare_units > 0) return false;  // gpushare's own plugin serves those
  return kind == GrantKind::kWhole ? g.whole() : !g.whole();
}

// This container's part of the record's entries: init containers the first ones, the others
// consecutive ones from `offset`.
template <typename Grant>
Result<std::vector<Grant>> part_of(const std::vector<Grant>& of_kind, const Candidate& c,
                                   const std::string& who) {
  const auto end = c.offset + c.container.count;
  if (end > static_cast<std::int64_t>(of_kind.size())) {
    return Error{"pod " + who + ": container " + c.container.name + " asks for " +
                 std::to_string(c.container.count) + " devices, its allocation record names " +
                 std::to_string(of_kind.size() - std::min<std::size_t>(of_kind.size(), c.offset))};
  }
  return std::vector<Grant>(of_kind.begin() + c.offset, of_kind.begin() + end);
}

Result<Admission> admission_of(const Candidate& c, const std::string& node,
                               std::string_view resource, GrantKind kind) {
  const auto& meta = (*c.pod)["metadata"];
  Admission a;
  a.pod_ns = string_field(meta, "namespace");
  a.pod_name = string_field(meta, "name");
  a.pod_uid = string_field(meta, "uid");
  a.container = c.container.name;
  const nlohmann::json* text =
      field_path(*c.pod, {"metadata", "annotations", k8s::kAllocationAnnotation});
  if (text == nullptr || !text->is_string()) return a;  // no record: the kubelet's choice
  const std::string who = a.pod_ns + "/" + a.pod_name;
  auto record =
      k8s::decode_allocation_record(text->get<std::string>(), a.pod_ns, a.pod_name, a.pod_uid);
  if (!record.ok()) return Error{"pod " + who + ": bad allocation record: " + record.error()};
  if (record->node != node) {
    return Error{"pod " + who + ": its allocation record is for node " + record->node};
  }
  a.has_record = true;
  if (kind == GrantKind::kMig) {
    std::vector<model::MigGrant> of_profile;
    for (const auto& m : record->mig) {
      if (m.profile != mig_profile_of(resource)) continue;
      // Counted from a node's NVIDIA inventory without a placement: the kubelet's choice.
      if (m.gpu < 0) return Admission{a.pod_ns, a.pod_name, a.pod_uid, a.container, false, {}, {}};
      of_profile.push_back(m);
    }
    auto part = part_of(of_profile, c, who);
    if (!part.ok()) return Error{part.error()};
    a.mig = std::move(part).value();
    return a;
  }
  std::vector<model::GpuGrant> of_kind;
  for (const auto& g : record->gpus) {
    if (is_kind(g, kind)) of_kind.push_back(g);
  }
  auto part = part_of(of_kind, c, who);
  if (!part.ok()) return Error{part.error()};
  a.grants = std::move(part).value();
  return a;
}

}  // namespace

Result<std::optional<Admission>> match_admission(const nlohmann::json& pod_list,
                                                 const std::string& node, std::string_view resource,
                                                 GrantKind kind, std::int64_t count,
                                                 const AllocationCheckpoint& checkpoint) {
  const nlohmann::json* items = field(pod_list, "items");
  if (items == nullptr || !items->is_array()) return Error{"the pod list has no items"};
  std::optional<Candidate> best;
  for (const auto& pod : *items) {
    if (!pod.is_object() || field(pod, "metadata") == nullptr) continue;
    if (string_field(pod.value("spec", nlohmann::json::object()), "nodeName") != node) continue;
    auto c = candidate(pod, resource, count, checkpoint);
    if (c && (!best || c->key < best->key)) best = std::move(c);
  }
  if (!best) return std::optional<Admission>{};
  auto a = admission_of(*best, node, resource, kind);
  if (!a.ok()) return Error{a.error()};
  return std::optional<Admission>{std::move(a).value()};
}

std::string mig_profile_of(std::string_view resource) {
  if (!resource.starts_with(kMigResourcePrefix)) return "";
  return std::string(resource.substr(kMigResourcePrefix.size()));
}

std::vector<RecordPart> record_parts(const nlohmann::json& pod, const model::Allocation& record,
                                     std::string_view resource, GrantKind kind) {
  std::vector<model::GpuGrant> of_kind;
  for (const auto& g : record.gpus) {
    if (kind != GrantKind::kMig && is_kind(g, kind)) of_kind.push_back(g);
  }
  std::vector<model::MigGrant> of_profile;
  bool unplaced = false;
  for (const auto& m : record.mig) {
    if (kind != GrantKind::kMig || m.profile != mig_profile_of(resource)) continue;
    unplaced = unplaced || m.gpu < 0;
    of_profile.push_back(m);
  }
  const std::string who = record.pod_ns + "/" + record.pod_name;
  std::vector<RecordPart> parts;
  std::int64_t offset = 0;
  for (const Asking& c : asking_containers(pod, resource)) {
    Candidate at{&pod, c, c.init ? 0 : offset, {}};
    if (!c.init) offset += c.count;
    RecordPart part{c.name, c.init, c.count, {}, {}, unplaced, ""};
    if (kind == GrantKind::kMig && !unplaced) {
      auto mine = part_of(of_profile, at, who);
      if (mine.ok())
        part.mig = std::move(mine).value();
      else
        part.error = mine.error();
    } else if (kind != GrantKind::kMig) {
      auto mine = part_of(of_kind, at, who);
      if (mine.ok())
        part.grants = std::move(mine).value();
      else
        part.error = mine.error();
    }
    parts.push_back(std::move(part));
  }
  return parts;
}

std::vector<model::MigGrant> mig_in_use(const nlohmann::json& pod_list, const std::string& node) {
  std::vector<model::MigGrant> out;
  const nlohmann::json* items = field(pod_list, "items");
  if (items == nullptr || !items->is_array()) return out;
  for (const auto& pod : *items) {
    if (!pod.is_object() || field(pod, "metadata") == nullptr) continue;
    if (string_field(pod.value("spec", nlohmann::json::object()), "nodeName") != node) continue;
    const std::string phase = string_field(pod.value("status", nlohmann::json::object()), "phase");
    if (phase == "Succeeded" || phase == "Failed") continue;
    const nlohmann::json* text =
        field_path(pod, {"metadata", "annotations", k8s::kAllocationAnnotation});
    if (text == nullptr || !text->is_string()) continue;
    const auto& meta = pod["metadata"];
    auto record =
        k8s::decode_allocation_record(text->get<std::string>(), string_field(meta, "namespace"),
                                      string_field(meta, "name"), string_field(meta, "uid"));
    if (!record.ok() || record->node != node) continue;
    out.insert(out.end(), record->mig.begin(), record->mig.end());
  }
  return out;
}

}  // namespace gapless::agent
