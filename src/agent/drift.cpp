#include "gapless/agent/drift.h"

#include <algorithm>
#include <deque>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "gapless/agent/device_plugin.h"
#include "gapless/agent/pod_match.h"
#include "gapless/k8s/allocation_record.h"
#include "gapless/k8s/json_fields.h"

namespace gapless::agent {

namespace {

using k8s::field;
using k8s::field_path;
using k8s::string_field;
using nlohmann::json;

const std::string kRecordName(k8s::kAllocationAnnotation);  // for messages

// What one device ID stands for: its GPU, and for MIG the placement's start slice.
struct DeviceRef {
  std::string gpu;
  int mig_start = -1;
  auto operator<=>(const DeviceRef&) const = default;
};

// "<UUID>", "<UUID>::<k>" or "<UUID>::slice-<start>" (device_plugin.h).
DeviceRef device_ref(std::string_view id) {
  const auto sep = id.find("::");
  DeviceRef ref{std::string(id.substr(0, sep)), -1};
  if (sep == std::string_view::npos) return ref;
  constexpr std::string_view kSlice = "slice-";
  const std::string_view rest = id.substr(sep + 2);
  if (rest.starts_with(kSlice)) {
    const std::string digits(rest.substr(kSlice.size()));
    if (!digits.empty() && digits.size() < 3 &&
        digits.find_first_not_of("0123456789") == std::string::npos) {
      ref.mig_start = std::stoi(digits);
    }
  }
  return ref;
}

GrantKind kind_of(std::string_view resource) {
  if (!mig_profile_of(resource).empty()) return GrantKind::kMig;
  return resource == kSharedGpuResource ? GrantKind::kShared : GrantKind::kWhole;
}

std::string ref_text(const DeviceRef& r) {
  return r.mig_start < 0 ? r.gpu : r.gpu + " slice " + std::to_string(r.mig_start);
}

std::string listed(const std::vector<std::string>& items) {
  if (items.empty()) return "nothing";
  std::string s;
  for (const auto& i : items) s += (s.empty() ? "" : ", ") + i;
  return s;
}

template <typename T>
std::vector<T> sorted_unique(std::vector<T> v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

// One container's devices of one resource, as the kubelet assigned them.
struct Held {
  const AssignedPod* pod = nullptr;
  const AssignedContainer* container = nullptr;
  std::string resource;
  std::vector<std::string> ids;  // sorted
  std::vector<DeviceRef> refs;   // sorted, unique (whole/shared: per GPU; MIG: per placement)
};

// Per container and resource, the union of its entries. The kubelet (v1.26 PodResources List)
// lists each device as its own entry with one ID, once per NUMA node of the device; other
// servers group the IDs in one entry. Compared entry by entry, a 2-GPU container was two
// mismatches (issue 37).
std::vector<Held> held_devices(const AssignedPod& pod) {
  std::vector<Held> out;
  for (const auto& c : pod.containers) {
    std::map<std::string, std::vector<std::string>> ids_of;  // resource -> IDs, every entry
    for (const auto& d : c.devices) {
      if (!drift_resource(d.resource)) continue;
      auto& ids = ids_of[d.resource];
      ids.insert(ids.end(), d.ids.begin(), d.ids.end());
    }
    for (auto& [resource, ids] : ids_of) {
      if (ids.empty()) continue;
      Held h{&pod, &c, resource, sorted_unique(std::move(ids)), {}};
      const bool mig = kind_of(resource) == GrantKind::kMig;
      for (const auto& id : h.ids) {
        DeviceRef r = device_ref(id);
        if (!mig) r.mig_start = -1;
        h.refs.push_back(std::move(r));
      }
      h.refs = sorted_unique(std::move(h.refs));
      out.push_back(std::move(h));
    }
  }
  return out;
}

// The pod's record for this node, or why it has none that counts.
struct RecordOf {
  std::optional<model::Allocation> record;
  std::string problem;  // non-empty: a record is there but names nothing usable here
};

RecordOf record_of(const json& pod, const std::string& node) {
  const json* text = field_path(pod, {"metadata", "annotations", k8s::kAllocationAnnotation});
  if (text == nullptr || !text->is_string()) return {};
  const json& meta = pod["metadata"];
  auto r = k8s::decode_allocation_record(text->get<std::string>(), string_field(meta, "namespace"),
                                         string_field(meta, "name"), string_field(meta, "uid"));
  if (!r.ok()) return {std::nullopt, "its allocation record cannot be read (" + r.error() + ")"};
  if (r->node != node) return {std::nullopt, "its allocation record is for node " + r->node};
  return {std::move(r).value(), ""};
}

// What the container's part of the record names, as device refs.
std::vector<DeviceRef> expected_refs(const RecordPart& part,
                                     const std::map<int, std::string>& uuid_by_index) {
  auto uuid_at = [&](int index) {
    auto it = uuid_by_index.find(index);
    return it != uuid_by_index.end() ? it->second : "GPU index " + std::to_string(index);
  };
  std::vector<DeviceRef> out;
  for (const auto& g : part.grants) out.push_back({g.uuid.empty() ? uuid_at(g.index) : g.uuid, -1});
  for (const auto& m : part.mig) out.push_back({uuid_at(m.gpu), m.start});
  return sorted_unique(std::move(out));
}

class Checker {
 public:
  Checker(const json& pods, const std::string& node, const std::map<int, std::string>& uuids)
      : node_(node), uuids_(uuids) {
    const json* items = field(pods, "items");
    if (items == nullptr || !items->is_array()) return;
    for (const auto& p : *items) {
      if (!p.is_object() || field(p, "metadata") == nullptr) continue;
      if (string_field(p.value("spec", json::object()), "nodeName") != node) continue;
      const json& meta = p["metadata"];
      by_name_[string_field(meta, "namespace") + "/" + string_field(meta, "name")] = &p;
    }
  }

  void check_pod(const AssignedPod& assigned) {
    const auto it = by_name_.find(assigned.ns + "/" + assigned.name);
    const json* pod = it != by_name_.end() ? it->second : nullptr;
    const std::string phase =
        pod ? string_field(pod->value("status", json::object()), "phase") : "";
    if (phase == "Succeeded" || phase == "Failed") return;  // nothing runs; the model freed it
    std::vector<const Held*> held;
    for (Held& h : held_devices(assigned)) held.push_back(&held_.emplace_back(std::move(h)));
    for (const Held* h : held) note_users(*h);
    if (pod == nullptr) {
      for (const Held* hp : held) {
        const Held& h = *hp;
        uncharged(h, h.refs);
        add(DriftKind::kUnknownPod, h, "", {},
            "pod " + assigned.ns + "/" + assigned.name + " container " + h.container->name +
                " holds " + h.resource + " devices " + listed(h.ids) +
                ", but the API server does not list the pod (deleted while it still runs?)");
      }
      return;
    }
    const std::string uid = string_field((*pod)["metadata"], "uid");
    const RecordOf rec = record_of(*pod, node_);
    if (!rec.record && rec.problem.empty()) {
      for (const Held* hp : held) {
        const Held& h = *hp;
        uncharged(h, h.refs);
        add(DriftKind::kNoRecord, h, uid, {},
            "container " + h.container->name + " holds " + h.resource + " devices " +
                listed(h.ids) + " (GPUs " + refs_text(h.refs) + ") without a " + kRecordName +
                " record (placed by another scheduler, or the plugin was bypassed); Gapless "
                "stops offering these GPUs until the container ends");
      }
      return;
    }
    for (const Held* h : held) compare(*pod, uid, rec, *h);
    if (rec.record && phase == "Running") find_stale(*pod, uid, *rec.record, assigned);
  }

  DriftReport finish() {
    for (const auto& [gpu, users] : users_) double_use(gpu, users);
    std::sort(report_.findings.begin(), report_.findings.end(),
              [](const DriftFinding& a, const DriftFinding& b) { return a.key() < b.key(); });
    for (auto& [gpu, who] : report_.fenced) who = sorted_unique(std::move(who));
    return std::move(report_);
  }

 private:
  struct User {
    std::string pod, container;  // "ns/name", container name
    const Held* held = nullptr;
    int mig_start = -1;
    bool whole = false;
  };

  static std::string refs_text(const std::vector<DeviceRef>& refs) {
    std::vector<std::string> t;
    for (const auto& r : refs) t.push_back(ref_text(r));
    return listed(t);
  }

  void note_users(const Held& h) {
    for (const auto& r : h.refs) {
      users_[r.gpu].push_back({h.pod->ns + "/" + h.pod->name, h.container->name, &h, r.mig_start,
                               h.resource == kWholeGpuResource});
    }
  }

  void uncharged(const Held& h, const std::vector<DeviceRef>& refs) {
    for (const auto& r : refs) {
      report_.fenced[r.gpu].push_back(h.pod->ns + "/" + h.pod->name + "/" + h.container->name);
    }
  }

  void add(DriftKind kind, const Held& h, const std::string& uid, std::vector<std::string> record,
           std::string message) {
    add(kind, *h.pod, uid, h.container->name, h.resource, h.ids, std::move(record),
        std::move(message));
  }
  void add(DriftKind kind, const AssignedPod& pod, const std::string& uid,
           const std::string& container, const std::string& resource,
           std::vector<std::string> devices, std::vector<std::string> record, std::string message) {
    report_.findings.push_back({kind, pod.ns, pod.name, uid, container, resource,
                                std::move(devices), sorted_unique(std::move(record)),
                                std::move(message)});
  }

  void compare(const json& pod, const std::string& uid, const RecordOf& rec, const Held& h) {
    std::vector<DeviceRef> expected;
    std::string why;
    if (rec.record) {
      const auto parts = record_parts(pod, *rec.record, h.resource, kind_of(h.resource));
      const auto part = std::find_if(parts.begin(), parts.end(), [&](const RecordPart& p) {
        return p.container == h.container->name;
      });
      if (part != parts.end() && part->kubelet_choice) return;  // no placement to compare
      if (part == parts.end()) {
        why = "its spec asks for no " + h.resource;
      } else if (!part->error.empty()) {
        why = part->error;
      } else {
        expected = expected_refs(*part, uuids_);
      }
    } else {
      why = rec.problem;
    }
    if (expected == h.refs) return;
    // The model charges the pod, not the container: a GPU the pod's record names anywhere is
    // not free in the model (a swap between the pod's own containers is reported, not fenced).
    const std::vector<DeviceRef> charged =
        rec.record ? pod_refs(*rec.record) : std::vector<DeviceRef>{};
    std::vector<DeviceRef> extra;
    std::set_difference(h.refs.begin(), h.refs.end(), charged.begin(), charged.end(),
                        std::back_inserter(extra));
    // MIG: a placement the record does not name fences its whole GPU.
    for (auto& r : extra) r.mig_start = -1;
    extra = sorted_unique(std::move(extra));
    uncharged(h, extra);
    std::vector<std::string> record;
    for (const auto& r : expected) record.push_back(ref_text(r));
    add(DriftKind::kMismatch, h, uid, record,
        "container " + h.container->name + " holds " + h.resource + " devices " + listed(h.ids) +
            " (GPUs " + refs_text(h.refs) + "), but its " + kRecordName + " record names " +
            (why.empty() ? refs_text(expected) : "nothing usable: " + why) +
            (extra.empty()
                 ? ""
                 : "; Gapless stops offering " + refs_text(extra) + " until the container ends"));
  }

  // Every GPU (MIG: placement) the record names, whatever the container.
  std::vector<DeviceRef> pod_refs(const model::Allocation& record) const {
    RecordPart all;
    all.grants = record.gpus;
    for (const auto& m : record.mig) {
      if (m.gpu >= 0) all.mig.push_back(m);
    }
    return expected_refs(all, uuids_);
  }

  void find_stale(const json& pod, const std::string& uid, const model::Allocation& record,
                  const AssignedPod& assigned) {
    std::set<std::string> resources;
    for (const auto& g : record.gpus) {
      if (g.gpushare_units == 0)
        resources.insert(g.whole() ? kWholeGpuResource : kSharedGpuResource);
    }
    for (const auto& m : record.mig) resources.insert(std::string(kMigResourcePrefix) + m.profile);
    for (const auto& resource : resources) {
      for (const RecordPart& part : record_parts(pod, record, resource, kind_of(resource))) {
        // Init containers have run and given their devices back; PodResources lists app ones.
        if (part.init || part.kubelet_choice || !part.error.empty()) continue;
        if (holds_any(assigned, part.container, resource)) continue;
        std::vector<std::string> names;
        for (const auto& r : expected_refs(part, uuids_)) names.push_back(ref_text(r));
        add(DriftKind::kStale, assigned, uid, part.container, resource, {}, names,
            "container " + part.container + " holds no " + resource + " devices, but its " +
                kRecordName + " record names " + listed(sorted_unique(names)) +
                ": the model charges the pod for GPUs it does not use");
      }
    }
  }

  static bool holds_any(const AssignedPod& pod, const std::string& container,
                        const std::string& resource) {
    for (const auto& c : pod.containers) {
      if (c.name != container) continue;
      for (const auto& d : c.devices) {
        if (d.resource == resource && !d.ids.empty()) return true;
      }
    }
    return false;
  }

  // A GPU held whole by one pod and used by another, or one MIG placement held by two pods.
  void double_use(const std::string& gpu, const std::vector<User>& users) {
    for (const User& u : users) {
      for (const User& o : users) {
        if (u.pod == o.pod) continue;
        const bool clash = u.whole || o.whole || (u.mig_start >= 0 && u.mig_start == o.mig_start);
        if (!clash) continue;
        const auto api = by_name_.find(u.pod);
        const std::string uid =
            api == by_name_.end() ? "" : string_field((*api->second)["metadata"], "uid");
        add(DriftKind::kDoubleUse, *u.held, uid, {},
            "container " + u.container + " uses GPU " + gpu + ", which container " + o.container +
                " of pod " + o.pod + " also uses (" + u.held->resource + " / " + o.held->resource +
                ")");
        break;  // one finding per container and GPU
      }
    }
  }

  const std::string& node_;
  const std::map<int, std::string>& uuids_;
  std::map<std::string, const json*> by_name_;
  std::deque<Held> held_;  // every container's devices; stable addresses for users_
  std::map<std::string, std::vector<User>> users_;  // GPU UUID -> who holds it
  DriftReport report_;
};

}  // namespace

std::string_view to_string(DriftKind kind) {
  switch (kind) {
    case DriftKind::kMismatch:
      return "mismatch";
    case DriftKind::kNoRecord:
      return "no-record";
    case DriftKind::kUnknownPod:
      return "unknown-pod";
    case DriftKind::kDoubleUse:
      return "double-use";
    case DriftKind::kStale:
      return "stale";
  }
  return "unknown";
}

std::string DriftFinding::key() const {
  std::string k = std::string(to_string(kind)) + "|" + pod_ns + "/" + pod_name + "|" + pod_uid +
                  "|" + container + "|" + resource + "|";
  for (const auto& d : devices) k += d + ",";
  k += "|";
  for (const auto& r : record) k += r + ",";
  return k;
}

bool drift_resource(std::string_view resource) {
  return resource == kWholeGpuResource || resource == kSharedGpuResource ||
         !mig_profile_of(resource).empty();
}

DriftReport find_drift(const nlohmann::json& pods, const std::string& node,
                       const std::vector<AssignedPod>& assigned,
                       const std::map<int, std::string>& uuid_by_index) {
  Checker checker(pods, node, uuid_by_index);
  for (const AssignedPod& p : assigned) checker.check_pod(p);
  return checker.finish();
}

}  // namespace gapless::agent
