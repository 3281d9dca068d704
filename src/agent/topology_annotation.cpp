#include "gapless/agent/topology_annotation.h"

#include <nlohmann/json.hpp>

namespace gapless::agent {

namespace {

using nlohmann::ordered_json;

ordered_json gpu_json(const GpuState& g, const std::vector<std::string>* in_use_by) {
  ordered_json j;
  j["index"] = g.index;
  j["uuid"] = g.uuid;
  j["model"] = g.model;
  j["memoryMiB"] = g.memory_mib;
  if (g.numa >= 0) j["numa"] = g.numa;
  j["healthy"] = g.healthy;
  if (in_use_by != nullptr && !in_use_by->empty()) j["inUseBy"] = *in_use_by;
  if (model::mig_family_of(g.model) != model::MigFamily::kNone) {
    ordered_json instances = ordered_json::array();
    for (const model::MigInstance& i : g.mig_instances) {
      instances.push_back({{"profile", i.profile}, {"start", i.start}});
    }
    j["mig"] = {{"enabled", g.mig_enabled}, {"instances", instances}};
  }
  return j;
}

}  // namespace

std::string topology_annotation(const NodeGpus& node,
                                const std::map<std::string, std::vector<std::string>>& in_use_by) {
  ordered_json doc;
  doc["version"] = 1;
  doc["gpus"] = ordered_json::array();
  for (const GpuState& g : node.gpus) {
    const auto users = g.uuid.empty() ? in_use_by.end() : in_use_by.find(g.uuid);
    doc["gpus"].push_back(gpu_json(g, users == in_use_by.end() ? nullptr : &users->second));
  }
  doc["links"] = ordered_json::array();
  for (const GpuPair& p : node.pairs) {
    ordered_json l;
    l["a"] = p.a;
    l["b"] = p.b;
    if (p.nvlink_lanes > 0) {
      l["type"] = "NVLink";
      l["count"] = p.nvlink_lanes;
    } else if (p.path != model::PciePath::kSYS || p.degraded) {
      l["type"] = "PCIe";
      l["path"] = std::string(model::to_string(p.path));
    } else {
      continue;
    }
    if (p.degraded) l["degraded"] = true;
    doc["links"].push_back(std::move(l));
  }
  return doc.dump(-1, ' ', false, ordered_json::error_handler_t::replace);
}

}  // namespace gapless::agent
