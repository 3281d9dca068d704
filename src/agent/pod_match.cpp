#include "gapless/agent/pod_match.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "gapless/k8s/allocation_record.h"
#include "gapless/k8s/device_asks.h"
#include "gapless/k8s/json_fields.h"

namespace gapless::agent {

namespace {

using k8s::field;
using k8s::field_path;
using k8s::string_field;

// Whether the pod is waiting for the kubelet: bound, Pending, not being deleted, and not yet
// fully served by the plugins (gapless.io/allocated).
bool admissible(const nlohmann::json& pod) {
  const nlohmann::json* phase = field_path(pod, {"status", "phase"});
  if (phase != nullptr && *phase != "Pending") return false;
  if (field_path(pod, {"metadata", "deletionTimestamp"}) != nullptr) return false;
  return !k8s::marked_allocated(pod);
}

struct Candidate {
  const nlohmann::json* pod = nullptr;
  k8s::DeviceAsk container;
  std::int64_t offset = 0;     // grants taken by the containers before it (0 for init ones)
  std::int64_t init_peak = 0;  // the most devices an init container of the pod asks
  bool last = false;           // no container asking the resource after it
};

std::optional<Candidate> candidate(const nlohmann::json& pod, std::string_view resource,
                                   std::int64_t count, const AllocationCheckpoint& checkpoint) {
  if (!admissible(pod)) return std::nullopt;
  const std::string uid = string_field(pod["metadata"], "uid");
  std::vector<k8s::DeviceAsk> asks = k8s::device_asks(pod);
  std::erase_if(asks, [&](const k8s::DeviceAsk& a) { return a.resource != resource; });
  std::int64_t init_peak = 0;
  for (const auto& a : asks) {
    if (a.init) init_peak = std::max(init_peak, a.count);
  }
  std::int64_t offset = 0;
  for (std::size_t i = 0; i < asks.size(); ++i) {
    const k8s::DeviceAsk& c = asks[i];
    if (!checkpoint.contains(uid, c.container)) {
      if (c.count != count) return std::nullopt;
      return Candidate{&pod, c, c.init ? 0 : offset, init_peak, i + 1 == asks.size()};
    }
    if (!c.init) offset += c.count;
  }
  return std::nullopt;  // every container that asks is served already
}

bool has_record(const nlohmann::json& pod) {
  return field_path(pod, {"metadata", "annotations", k8s::kAllocationAnnotation}) != nullptr;
}

std::string pod_name(const nlohmann::json& pod) {
  const auto& meta = pod["metadata"];
  return string_field(meta, "namespace") + "/" + string_field(meta, "name");
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
    return Error{"pod " + who + ": container " + c.container.container + " asks for " +
                 std::to_string(c.container.count) + " devices, its allocation record names " +
                 std::to_string(of_kind.size() - std::min<std::size_t>(of_kind.size(), c.offset))};
  }
  return std::vector<Grant>(of_kind.begin() + c.offset, of_kind.begin() + end);
}

// The record's first grants, which init containers held and the kubelet may pass again.
template <typename Grant>
std::vector<Grant> reusable_of(const std::vector<Grant>& of_kind, const Candidate& c) {
  const auto n = std::min<std::size_t>(of_kind.size(), static_cast<std::size_t>(c.init_peak));
  return std::vector<Grant>(of_kind.begin(), of_kind.begin() + static_cast<long>(n));
}

// The "uuid" the record gives each of its "mig" entries ("" where it gives none).
std::vector<std::string> mig_uuids_of(const std::string& text) {
  std::vector<std::string> out;
  const auto doc = nlohmann::json::parse(text, nullptr, false);
  const nlohmann::json* mig = doc.is_discarded() ? nullptr : field(doc, "mig");
  if (mig == nullptr || !mig->is_array()) return out;
  for (const auto& m : *mig) out.push_back(string_field(m, "uuid"));
  return out;
}

Result<Admission> admission_of(const Candidate& c, const std::string& node,
                               std::string_view resource, GrantKind kind) {
  const auto& meta = (*c.pod)["metadata"];
  Admission a;
  a.pod_ns = string_field(meta, "namespace");
  a.pod_name = string_field(meta, "name");
  a.pod_uid = string_field(meta, "uid");
  a.container = c.container.container;
  a.last = c.last;
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
    std::vector<std::string> uuids;
    const auto record_uuids = mig_uuids_of(text->get<std::string>());
    for (std::size_t i = 0; i < record->mig.size(); ++i) {
      const auto& m = record->mig[i];
      if (m.profile != mig_profile_of(resource)) continue;
      if (m.gpu < 0) {
        // Counted from a node's NVIDIA inventory without a placement: the kubelet's choice.
        a.has_record = false;
        return a;
      }
      of_profile.push_back(m);
      uuids.push_back(i < record_uuids.size() ? record_uuids[i] : "");
    }
    auto part = part_of(of_profile, c, who);
    if (!part.ok()) return Error{part.error()};
    a.mig = std::move(part).value();
    a.reusable_mig = reusable_of(of_profile, c);
    a.mig_uuids.assign(uuids.begin() + c.offset, uuids.begin() + c.offset + c.container.count);
    a.reusable_mig_uuids.assign(uuids.begin(), uuids.begin() + a.reusable_mig.size());
    return a;
  }
  std::vector<model::GpuGrant> of_kind;
  for (const auto& g : record->gpus) {
    if (is_kind(g, kind)) of_kind.push_back(g);
  }
  auto part = part_of(of_kind, c, who);
  if (!part.ok()) return Error{part.error()};
  a.grants = std::move(part).value();
  a.reusable = reusable_of(of_kind, c);
  return a;
}

}  // namespace

Result<std::optional<Admission>> match_admission(const nlohmann::json& pod_list,
                                                 const std::string& node, std::string_view resource,
                                                 GrantKind kind, std::int64_t count,
                                                 const AllocationCheckpoint& checkpoint) {
  const nlohmann::json* items = field(pod_list, "items");
  if (items == nullptr || !items->is_array()) return Error{"the pod list has no items"};
  std::vector<Candidate> found;
  for (const auto& pod : *items) {
    if (!pod.is_object() || field(pod, "metadata") == nullptr) continue;
    if (string_field(pod.value("spec", nlohmann::json::object()), "nodeName") != node) continue;
    if (auto c = candidate(pod, resource, count, checkpoint)) found.push_back(std::move(*c));
  }
  if (found.empty()) return std::optional<Admission>{};
  if (found.size() > 1) {
    // No guessing. Pods without a record would all get the kubelet's choice: nothing to tell.
    if (std::none_of(found.begin(), found.end(),
                     [](const Candidate& c) { return has_record(*c.pod); })) {
      return std::optional<Admission>{};
    }
    std::string names;
    for (const auto& c : found) {
      names += (names.empty() ? "" : ", ") + pod_name(*c.pod) +
               (has_record(*c.pod) ? "" : " (no record)");
    }
    return Error{"cannot tell which pod this Allocate of " + std::to_string(count) + " " +
                 std::string(resource) + " is for: " + std::to_string(found.size()) +
                 " pending pods on this node ask for it next (" + names +
                 "); refusing rather than guessing, the kubelet fails this pod's admission"};
  }
  auto a = admission_of(found.front(), node, resource, kind);
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
  std::vector<k8s::DeviceAsk> asks = k8s::device_asks(pod);
  std::erase_if(asks, [&](const k8s::DeviceAsk& a) { return a.resource != resource; });
  for (const k8s::DeviceAsk& c : asks) {
    Candidate at{&pod, c, c.init ? 0 : offset};
    if (!c.init) offset += c.count;
    RecordPart part{c.container, c.init, c.count, {}, {}, unplaced, ""};
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
