#include "pod_stream.h"

#include <random>

namespace gapless::bench {

using nlohmann::json;

namespace {

json pod_with(const std::string& name, json limits, json annotations) {
  json container = {{"name", "main"},
                    {"image", "registry.example/train:1"},
                    {"resources", {{"limits", limits}, {"requests", limits}}}};
  return json{{"apiVersion", "v1"},
              {"kind", "Pod"},
              {"metadata",
               {{"name", name},
                {"namespace", "bench"},
                {"uid", "uid-" + name},
                {"labels", {{"app", "bench"}}},
                {"annotations", std::move(annotations)}}},
              {"spec", {{"schedulerName", "gapless"}, {"containers", json::array({container})}}},
              {"status", {{"phase", "Pending"}}}};
}

}  // namespace

std::vector<StreamPod> pod_stream(int count, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<StreamPod> out;
  out.reserve(static_cast<std::size_t>(count));
  for (int i = 0; i < count; ++i) {
    StreamPod p;
    p.name = "pod-" + std::to_string(i);
    const int roll = static_cast<int>(rng() % 100);
    json limits = {{"cpu", "4"}, {"memory", "16Gi"}};
    json annotations = json::object();
    if (roll < 60) {
      const int n = roll < 30 ? 1 : roll < 45 ? 2 : roll < 55 ? 4 : 8;
      limits["nvidia.com/gpu"] = std::to_string(n);
      if (n >= 4) annotations["gapless.io/topology"] = "nvlink-required";
      p.shape = "whole-" + std::to_string(n);
    } else if (roll < 85) {
      static const int kMem[] = {4096, 8192, 16384};
      static const int kMilli[] = {125, 250, 500};
      const int k = static_cast<int>(rng() % 3);
      limits["gapless.io/gpu-memory"] = std::to_string(kMem[k]);
      limits["gapless.io/gpu-compute"] = std::to_string(kMilli[k]);
      p.shape = "shared-" + std::to_string(kMem[k] / 1024) + "g";
    } else {
      static const char* kProfiles[] = {"1g.10gb", "2g.20gb", "3g.40gb"};
      const char* profile = kProfiles[rng() % 3];
      limits[std::string("nvidia.com/mig-") + profile] = "1";
      p.shape = std::string("mig-") + profile;
    }
    p.pod = pod_with(p.name, std::move(limits), std::move(annotations));
    out.push_back(std::move(p));
  }
  return out;
}

json node_object(const model::Node& node) {
  json gpus = json::array();
  for (const model::Gpu& g : node.gpus) {
    json mig = {{"enabled", g.mig.enabled}, {"instances", json::array()}};
    gpus.push_back({{"index", g.index},
                    {"uuid", g.uuid},
                    {"model", g.model},
                    {"memoryMiB", g.memory_mib},
                    {"numa", g.numa},
                    {"healthy", g.healthy},
                    {"mig", mig}});
  }
  json links = json::array();
  const int n = static_cast<int>(node.gpus.size());
  for (int a = 0; a < n; ++a) {
    for (int b = a + 1; b < n; ++b) {
      const model::Link l = node.links.get(a, b);
      if (l.kind == model::Link::Kind::kNVLink) {
        links.push_back({{"a", a}, {"b", b}, {"type", "NVLink"}, {"count", l.nvlink_count}});
      } else {
        links.push_back({{"a", a},
                         {"b", b},
                         {"type", "PCIe"},
                         {"path", std::string(model::to_string(l.path))}});
      }
    }
  }
  const json topology = {{"version", 1}, {"gpus", gpus}, {"links", links}};
  const std::string product = node.gpus.empty() ? "" : node.gpus[0].model;
  return json{
      {"apiVersion", "v1"},
      {"kind", "Node"},
      {"metadata",
       {{"name", node.name},
        {"uid", "uid-" + node.name},
        {"labels",
         {{"kubernetes.io/hostname", node.name},
          {"kubernetes.io/os", "linux"},
          {"kubernetes.io/arch", "amd64"},
          {"node.kubernetes.io/instance-type", "gpu-8x"},
          {"topology.kubernetes.io/zone", "zone-a"},
          {"nvidia.com/gpu.product", product},
          {"nvidia.com/gpu.count", std::to_string(n)}}},
        {"annotations", {{"gapless.io/gpu-topology", topology.dump()}}}}},
      {"status",
       {{"capacity", {{"cpu", "128"}, {"memory", "1Ti"}, {"nvidia.com/gpu", std::to_string(n)}}},
        {"allocatable",
         {{"cpu", "126"}, {"memory", "1000Gi"}, {"nvidia.com/gpu", std::to_string(n)}}}}}};
}

}  // namespace gapless::bench
