// gapless.io/gpu-topology -> model::Node. Validation is strict: an annotation that is wrong in
// any field is rejected as a whole, so a typo never turns into a wrong topology silently.
#include <algorithm>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "gapless/k8s/json_fields.h"
#include "gapless/k8s/node_inventory.h"
#include "gapless/model/mig.h"
#include "gapless/model/topology.h"

namespace gapless::k8s {

using nlohmann::json;

namespace {

// Fills `out` from one optional integer field; `ok` checks the range.
template <typename Ok>
Status int_field(const json& obj, std::string_view key, const std::string& where, bool required,
                 const char* rule, Ok ok, std::int64_t* out) {
  const json* v = field(obj, key);
  if (v == nullptr) {
    return required ? Status(Error{where + "." + std::string(key) + ": missing"}) : Status::Ok();
  }
  auto n = as_int64(*v);
  if (!n || !ok(*n)) {
    return Error{where + "." + std::string(key) + ": " + rule + ", got " + json_text(*v)};
  }
  *out = *n;
  return Status::Ok();
}

Status bool_field(const json& obj, std::string_view key, const std::string& where, bool* out) {
  const json* v = field(obj, key);
  if (v == nullptr) return Status::Ok();
  if (!v->is_boolean()) {
    return Error{where + "." + std::string(key) + ": must be true or false, got " + json_text(*v)};
  }
  *out = v->get<bool>();
  return Status::Ok();
}

std::string allowed_starts(const model::MigProfile& p) {
  std::string s;
  for (int start : p.starts) s += (s.empty() ? "" : ", ") + std::to_string(start);
  return s;
}

Status parse_mig(const json& mig, const std::string& where, model::Gpu* gpu) {
  if (!mig.is_object()) return Error{where + ": must be an object"};
  if (Status s = bool_field(mig, "enabled", where, &gpu->mig.enabled); !s.ok()) return s;
  if (gpu->mig.enabled && gpu->mig_family == model::MigFamily::kNone) {
    return Error{where + ".enabled: " + gpu->model + " does not support MIG"};
  }
  const json* instances = field(mig, "instances");
  if (instances == nullptr) return Status::Ok();
  if (!instances->is_array()) return Error{where + ".instances: must be a list"};
  if (!instances->empty() && !gpu->mig.enabled) {
    return Error{where + ".instances: listed but mig.enabled is not true"};
  }
  std::uint8_t used = 0;
  bool media = false;
  for (std::size_t i = 0; i < instances->size(); ++i) {
    const json& inst = (*instances)[i];
    std::string at = where + ".instances[" + std::to_string(i) + "]";
    if (!inst.is_object()) return Error{at + ": must be an object"};
    const json* name = field(inst, "profile");
    if (name == nullptr || !name->is_string()) return Error{at + ".profile: must be a string"};
    const model::MigProfile* p = model::find_mig_profile(gpu->mig_family, name->get<std::string>());
    if (p == nullptr) {
      return Error{at + ".profile: \"" + name->get<std::string>() + "\" is not a MIG profile of " +
                   gpu->model};
    }
    std::int64_t start = -1;
    if (Status s = int_field(
            inst, "start", at, true, "must be a memory slice index",
            [](std::int64_t v) { return v >= 0 && v < model::kMigMemorySlices; }, &start);
        !s.ok()) {
      return s;
    }
    bool allowed = false;
    for (int s : p->starts) allowed = allowed || s == start;
    if (!allowed) {
      return Error{at + ".start: " + std::string(p->name) + " may start at " + allowed_starts(*p) +
                   ", got " + std::to_string(start)};
    }
    std::uint8_t mask = model::mig_slice_mask(static_cast<int>(start), p->memory_slices);
    if ((used & mask) != 0) return Error{at + ": overlaps another instance"};
    if (p->media_extensions && media) {
      return Error{at + ": only one media-extension (+me) instance fits on a GPU"};
    }
    used |= mask;
    media = media || p->media_extensions;
    gpu->mig.instances.push_back({name->get<std::string>(), static_cast<int>(start)});
  }
  return Status::Ok();
}

// "inUseBy": the containers the agent's drift check saw using the GPU that no record charges
// for it (docs/node-drift.md). Optional; a list of non-empty strings.
Status parse_in_use_by(const json& g, const std::string& where, model::Gpu* gpu) {
  const json* users = field(g, "inUseBy");
  if (users == nullptr) return Status::Ok();
  constexpr std::size_t kMaxUsers = 256, kMaxName = 512;
  if (!users->is_array() || users->size() > kMaxUsers) {
    return Error{where + ".inUseBy: must be a list of at most " + std::to_string(kMaxUsers) +
                 " container names"};
  }
  for (std::size_t i = 0; i < users->size(); ++i) {
    const json& u = (*users)[i];
    if (!u.is_string() || u.get_ref<const std::string&>().empty() ||
        u.get_ref<const std::string&>().size() > kMaxName) {
      return Error{where + ".inUseBy[" + std::to_string(i) + "]: must be a non-empty string"};
    }
    gpu->in_use_by.push_back(u.get<std::string>());
  }
  return Status::Ok();
}

Status parse_gpu(const json& g, const std::string& where, model::Gpu* gpu) {
  if (!g.is_object()) return Error{where + ": must be an object"};
  const json* uuid = field(g, "uuid");
  if (uuid != nullptr && !uuid->is_string()) return Error{where + ".uuid: must be a string"};
  if (uuid != nullptr) gpu->uuid = uuid->get<std::string>();
  const json* model = field(g, "model");
  if (model == nullptr || !model->is_string() || model->get_ref<const std::string&>().empty()) {
    return Error{where + ".model: must be a non-empty string"};
  }
  gpu->model = model->get<std::string>();
  gpu->mig_family = model::mig_family_of(gpu->model);
  if (Status s = int_field(
          g, "memoryMiB", where, true, "must be a positive integer",
          [](std::int64_t v) { return v > 0; }, &gpu->memory_mib);
      !s.ok()) {
    return s;
  }
  std::int64_t numa = -1;
  if (Status s = int_field(
          g, "numa", where, false, "must be an integer >= -1",
          [](std::int64_t v) { return v >= -1 && v <= 1'000'000; }, &numa);
      !s.ok()) {
    return s;
  }
  gpu->numa = static_cast<int>(numa);
  if (Status s = bool_field(g, "healthy", where, &gpu->healthy); !s.ok()) return s;
  if (Status s = parse_in_use_by(g, where, gpu); !s.ok()) return s;
  if (const json* mig = field(g, "mig")) {
    if (Status s = parse_mig(*mig, where + ".mig", gpu); !s.ok()) return s;
  }
  gpu->used.mig_instance_used.assign(gpu->mig.instances.size(), false);
  return Status::Ok();
}

Status parse_link(const json& l, const std::string& where, int n, model::Node* node,
                  std::set<std::pair<int, int>>* seen) {
  if (!l.is_object()) return Error{where + ": must be an object"};
  std::int64_t a = -1, b = -1;
  std::string rule = "must be a GPU index 0.." + std::to_string(n - 1);
  auto in_range = [n](std::int64_t v) { return v >= 0 && v < n; };
  for (auto [key, out] : {std::pair{"a", &a}, {"b", &b}}) {
    if (Status s = int_field(l, key, where, true, rule.c_str(), in_range, out); !s.ok()) return s;
  }
  if (a == b) return Error{where + ": links GPU " + std::to_string(a) + " to itself"};
  // Not std::minmax: it would return references to the temporaries of the casts.
  const std::pair<int, int> pair{static_cast<int>(std::min(a, b)),
                                 static_cast<int>(std::max(a, b))};
  if (!seen->insert(pair).second) {
    return Error{where + ": pair (" + std::to_string(pair.first) + "," +
                 std::to_string(pair.second) + ") listed twice"};
  }
  model::Link link;
  const std::string type = string_field(l, "type");
  if (type == "NVLink") {
    link.kind = model::Link::Kind::kNVLink;
    std::int64_t count = 0;
    if (Status s = int_field(
            l, "count", where, true, "must be an integer >= 1",
            [](std::int64_t v) { return v >= 1 && v <= 1024; }, &count);
        !s.ok()) {
      return s;
    }
    link.nvlink_count = static_cast<int>(count);
  } else if (type == "PCIe") {
    const std::string path = string_field(l, "path");
    if (!model::parse_pcie_path(path, &link.path)) {
      return Error{where + ".path: must be PIX, PXB, PHB, NODE or SYS, got \"" + path + "\""};
    }
  } else {
    const json* t = field(l, "type");
    return Error{where + ".type: must be \"NVLink\" or \"PCIe\", got " +
                 (t ? json_text(*t) : std::string("nothing"))};
  }
  if (Status s = bool_field(l, "degraded", where, &link.degraded); !s.ok()) return s;
  node->links.set(pair.first, pair.second, link);
  return Status::Ok();
}

Status parse_topology(const json& doc, model::Node* node) {
  if (!doc.is_object()) return Error{"must be a JSON object"};
  const json* version = field(doc, "version");
  if (version == nullptr || as_int64(*version) != 1) {
    return Error{"version: must be 1, got " + (version ? json_text(*version) : "nothing")};
  }
  const json* gpus = field(doc, "gpus");
  if (gpus == nullptr || !gpus->is_array()) return Error{"gpus: must be a list"};
  // The model holds at most 64 GPUs per node: GPU sets are 64-bit masks, so a 65th GPU shifted
  // past bit 63 (fuzz/regressions/topology/). Checked before sizing anything by the list.
  if (gpus->size() > static_cast<std::size_t>(model::LinkGraph::kMaxGpus)) {
    return Error{"gpus: " + std::to_string(gpus->size()) + " GPUs is more than " +
                 std::to_string(model::LinkGraph::kMaxGpus)};
  }
  const int n = static_cast<int>(gpus->size());
  node->gpus.assign(n, model::Gpu{});
  std::vector<bool> filled(n, false);
  for (int i = 0; i < n; ++i) {
    std::string where = "gpus[" + std::to_string(i) + "]";
    const json& g = (*gpus)[i];
    if (!g.is_object()) return Error{where + ": must be an object"};
    std::int64_t index = -1;
    if (Status s = int_field(
            g, "index", where, true, ("must be 0.." + std::to_string(n - 1)).c_str(),
            [n](std::int64_t v) { return v >= 0 && v < n; }, &index);
        !s.ok()) {
      return s;
    }
    if (filled[index]) return Error{where + ".index: " + std::to_string(index) + " listed twice"};
    filled[index] = true;
    model::Gpu& gpu = node->gpus[index];
    gpu.index = static_cast<int>(index);
    if (Status s = parse_gpu(g, where, &gpu); !s.ok()) return s;
  }
  node->links = model::LinkGraph(n);
  const json* links = field(doc, "links");
  if (links == nullptr) return Status::Ok();
  if (!links->is_array()) return Error{"links: must be a list"};
  std::set<std::pair<int, int>> seen;
  for (std::size_t i = 0; i < links->size(); ++i) {
    std::string where = "links[" + std::to_string(i) + "]";
    if (Status s = parse_link((*links)[i], where, n, node, &seen); !s.ok()) return s;
  }
  return Status::Ok();
}

}  // namespace

Result<model::Node> node_from_topology_annotation(std::string_view node_name,
                                                  std::string_view annotation) {
  const std::string prefix = "node " + std::string(node_name) + ": gapless.io/gpu-topology: ";
  // Error messages quote values, and dumping one recurses once per level.
  if (!json_depth_ok(annotation)) return Error{prefix + kJsonTooDeep};
  json doc = json::parse(annotation, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return Error{prefix + "not valid JSON"};
  model::Node node;
  node.name = std::string(node_name);
  node.source = model::InventorySource::kTopologyAnnotation;
  if (Status s = parse_topology(doc, &node); !s.ok()) return Error{prefix + s.error()};
  return node;
}

}  // namespace gapless::k8s
