#include "gapless/k8s/allocation_record.h"

#include <set>
#include <string>

#include "gapless/k8s/json_fields.h"
#include "gapless/model/gpu.h"

namespace gapless::k8s {

using nlohmann::json;

namespace {

constexpr int kRecordVersion = 1;

// Reads an optional non-negative integer field of a record entry.
Status count_field(const json& obj, std::string_view key, const std::string& where,
                   std::int64_t limit, std::int64_t* out) {
  const json* v = field(obj, key);
  if (v == nullptr) return Status::Ok();
  auto n = as_int64(*v);
  if (!n || *n < 0 || *n > limit) {
    return Error{where + "." + std::string(key) + ": must be an integer 0.." +
                 std::to_string(limit) + ", got " + json_text(*v)};
  }
  *out = *n;
  return Status::Ok();
}

constexpr std::int64_t kMaxInt = 0x7fffffff;
constexpr std::int64_t kMaxUnits = std::int64_t{1} << 53;

Status decode_gpu(const json& g, const std::string& where, model::GpuGrant* out) {
  if (!g.is_object()) return Error{where + ": must be an object"};
  if (field(g, "index") == nullptr) return Error{where + ".index: missing"};
  std::int64_t index = 0, compute = 0;
  if (Status s = count_field(g, "index", where, kMaxInt, &index); !s.ok()) return s;
  out->index = static_cast<int>(index);
  const json* uuid = field(g, "uuid");
  if (uuid != nullptr && !uuid->is_string()) return Error{where + ".uuid: must be a string"};
  if (uuid != nullptr) out->uuid = uuid->get<std::string>();
  if (Status s = count_field(g, "memoryMiB", where, kMaxUnits, &out->memory_mib); !s.ok()) return s;
  if (Status s = count_field(g, "computeMilli", where, model::kFullComputeMilli, &compute);
      !s.ok()) {
    return s;
  }
  out->compute_milli = static_cast<int>(compute);
  if (Status s = count_field(g, "gpuMem", where, kMaxUnits, &out->gpushare_units); !s.ok()) {
    return s;
  }
  if (out->gpushare_units > 0 && (out->memory_mib > 0 || out->compute_milli > 0)) {
    return Error{where + ": gpuMem cannot be combined with memoryMiB or computeMilli"};
  }
  return Status::Ok();
}

Status decode_mig(const json& m, const std::string& where, model::MigGrant* out) {
  if (!m.is_object()) return Error{where + ": must be an object"};
  const json* profile = field(m, "profile");
  if (profile == nullptr || !profile->is_string() ||
      profile->get_ref<const std::string&>().empty()) {
    return Error{where + ".profile: must be a non-empty string"};
  }
  out->profile = profile->get<std::string>();
  // A pooled instance (GFD inventory, placement unknown) has neither gpu nor start.
  bool has_gpu = field(m, "gpu") != nullptr, has_start = field(m, "start") != nullptr;
  if (has_gpu != has_start) return Error{where + ": gpu and start must be given together"};
  if (!has_gpu) return Status::Ok();
  std::int64_t gpu = 0, start = 0;
  if (Status s = count_field(m, "gpu", where, kMaxInt, &gpu); !s.ok()) return s;
  if (Status s = count_field(m, "start", where, model::kMigMemorySlices - 1, &start); !s.ok()) {
    return s;
  }
  out->gpu = static_cast<int>(gpu);
  out->start = static_cast<int>(start);
  return Status::Ok();
}

Status decode(const json& doc, model::Allocation* a) {
  if (!doc.is_object()) return Error{"must be a JSON object"};
  const json* v = field(doc, "v");
  if (v == nullptr || as_int64(*v) != kRecordVersion) {
    return Error{"v: unsupported version " + (v ? json_text(*v) : std::string("(missing)")) +
                 ", expected 1"};
  }
  const json* node = field(doc, "node");
  if (node == nullptr || !node->is_string() || node->get_ref<const std::string&>().empty()) {
    return Error{"node: must be a non-empty string"};
  }
  a->node = node->get<std::string>();
  for (const char* key : {"gpus", "mig"}) {
    const json* list = field(doc, key);
    if (list != nullptr && !list->is_array()) return Error{std::string(key) + ": must be a list"};
  }
  if (const json* gpus = field(doc, "gpus")) {
    std::set<int> seen;
    for (std::size_t i = 0; i < gpus->size(); ++i) {
      std::string where = "gpus[" + std::to_string(i) + "]";
      model::GpuGrant g;
      if (Status s = decode_gpu((*gpus)[i], where, &g); !s.ok()) return s;
      if (!seen.insert(g.index).second) {
        return Error{where + ".index: GPU " + std::to_string(g.index) + " listed twice"};
      }
      a->gpus.push_back(std::move(g));
    }
  }
  if (const json* mig = field(doc, "mig")) {
    for (std::size_t i = 0; i < mig->size(); ++i) {
      model::MigGrant m;
      if (Status s = decode_mig((*mig)[i], "mig[" + std::to_string(i) + "]", &m); !s.ok()) return s;
      a->mig.push_back(std::move(m));
    }
  }
  if (a->gpus.empty() && a->mig.empty()) return Error{"holds no GPU and no MIG instance"};
  if (!a->gpus.empty() && !a->mig.empty()) {
    return Error{"holds both GPUs and MIG instances (a pod asks for one kind)"};
  }
  return Status::Ok();
}

}  // namespace

std::string encode_allocation_record(const model::Allocation& a, const model::Node* node) {
  // ordered_json keeps "v" and "node" first, which reads better in kubectl output.
  nlohmann::ordered_json doc;
  doc["v"] = kRecordVersion;
  doc["node"] = a.node;
  doc["gpus"] = nlohmann::ordered_json::array();
  for (const model::GpuGrant& g : a.gpus) {
    nlohmann::ordered_json e;
    e["index"] = g.index;
    e["uuid"] = g.uuid;
    if (g.memory_mib > 0) e["memoryMiB"] = g.memory_mib;
    if (g.compute_milli > 0) e["computeMilli"] = g.compute_milli;
    if (g.gpushare_units > 0) e["gpuMem"] = g.gpushare_units;
    doc["gpus"].push_back(std::move(e));
  }
  if (!a.mig.empty()) {
    doc["mig"] = nlohmann::ordered_json::array();
    for (const model::MigGrant& m : a.mig) {
      nlohmann::ordered_json e;
      if (m.gpu >= 0) e["gpu"] = m.gpu;
      e["profile"] = m.profile;
      if (m.gpu >= 0) e["start"] = m.start;
      if (node != nullptr && m.gpu >= 0 && static_cast<std::size_t>(m.gpu) < node->gpus.size() &&
          !node->gpus[static_cast<std::size_t>(m.gpu)].uuid.empty()) {
        e["uuid"] = node->gpus[static_cast<std::size_t>(m.gpu)].uuid;
      }
      doc["mig"].push_back(std::move(e));
    }
  }
  return doc.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

Result<model::Allocation> decode_allocation_record(std::string_view text, const std::string& ns,
                                                   const std::string& name,
                                                   const std::string& uid) {
  const std::string prefix = std::string(kAllocationAnnotation) + ": ";
  // Error messages quote values, and dumping one recurses once per level.
  if (!json_depth_ok(text)) return Error{prefix + kJsonTooDeep};
  json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return Error{prefix + "not valid JSON"};
  model::Allocation a;
  a.pod_ns = ns;
  a.pod_name = name;
  a.pod_uid = uid;
  if (Status s = decode(doc, &a); !s.ok()) return Error{prefix + s.error()};
  return a;
}

std::map<std::string, std::string> gpushare_annotations(const model::Allocation& a,
                                                        const model::Node& node,
                                                        std::int64_t assume_time_unix_nano) {
  std::map<std::string, std::string> out;
  for (const model::GpuGrant& g : a.gpus) {
    if (g.gpushare_units <= 0) continue;
    if (g.index < 0 || g.index >= static_cast<int>(node.gpus.size())) return {};
    out["ALIYUN_COM_GPU_MEM_IDX"] = std::to_string(g.index);
    out["ALIYUN_COM_GPU_MEM_POD"] = std::to_string(g.gpushare_units);
    out["ALIYUN_COM_GPU_MEM_DEV"] = std::to_string(node.gpus[g.index].gpushare_capacity);
    out["ALIYUN_COM_GPU_MEM_ASSIGNED"] = "false";
    out["ALIYUN_COM_GPU_MEM_ASSUME_TIME"] = std::to_string(assume_time_unix_nano);
    break;  // gpushare places a pod on one GPU
  }
  return out;
}

}  // namespace gapless::k8s
