// Hand-built nodes, requests and profiles for the model and placement tests. Every builder keeps
// the model's invariants: gpus[i].index == i, links sized to the GPU count, mig_family derived
// from the product string, mig_instance_used sized to the static layout.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "gapless/model/allocation.h"
#include "gapless/model/cluster.h"
#include "gapless/model/node.h"
#include "gapless/model/request.h"
#include "gapless/placement/profile.h"
#include "gapless/placement/strategy.h"

namespace gapless::testnodes {

inline constexpr const char* kH100 = "NVIDIA-H100-80GB-HBM3";
inline constexpr const char* kV100 = "Tesla-V100-SXM2-16GB";
inline constexpr const char* kT4 = "Tesla-T4";
inline constexpr const char* kA100_80 = "NVIDIA-A100-SXM4-80GB";
inline constexpr const char* kA100_40 = "NVIDIA-A100-SXM4-40GB";

inline model::Gpu make_gpu(int index, const std::string& product, std::int64_t memory_mib,
                           int numa = -1) {
  model::Gpu g;
  g.index = index;
  g.uuid = "GPU-" + std::to_string(index) + "-" + product;
  g.model = product;
  g.memory_mib = memory_mib;
  g.numa = numa;
  g.mig_family = model::mig_family_of(product);
  return g;
}

// Re-derives the per-GPU invariants after a test edited the GPUs by hand.
inline void normalize(model::Node& n) {
  for (std::size_t i = 0; i < n.gpus.size(); ++i) {
    model::Gpu& g = n.gpus[i];
    g.index = static_cast<int>(i);
    g.mig_family = model::mig_family_of(g.model);
    g.used = model::GpuUsage{};
    g.used.mig_instance_used.assign(g.mig.instances.size(), false);
  }
}

// `count` identical GPUs with no links set (every pair PCIe SYS).
inline model::Node pcie_node(const std::string& name, int count, const std::string& product,
                             std::int64_t memory_mib) {
  model::Node n;
  n.name = name;
  for (int i = 0; i < count; ++i)
    n.gpus.push_back(make_gpu(i, product, memory_mib, i < count / 2 ? 0 : 1));
  n.links = model::LinkGraph(count);
  normalize(n);
  return n;
}

inline model::Link nvlink(int count) {
  model::Link l;
  l.kind = model::Link::Kind::kNVLink;
  l.nvlink_count = count;
  return l;
}

inline model::Link pcie(model::PciePath path) {
  model::Link l;
  l.kind = model::Link::Kind::kPCIe;
  l.path = path;
  return l;
}

// 8x H100 behind NVSwitch: every pair NVLink x18.
inline model::Node h100_nvswitch(const std::string& name = "h100") {
  model::Node n = pcie_node(name, 8, kH100, 81559);
  for (int a = 0; a < 8; ++a) {
    for (int b = a + 1; b < 8; ++b) n.links.set(a, b, nvlink(18));
  }
  return n;
}

// Are a and b NVLink neighbours in the DGX-1 hybrid cube-mesh?
inline bool dgx1_linked(int a, int b) {
  if (a == b) return false;
  if (a / 4 == b / 4) return true;  // inside a quad: all pairs
  return a % 4 == b % 4;            // i <-> i + 4
}

// DGX-1 V100: two fully connected quads {0..3}, {4..7} plus i <-> i+4; other pairs PCIe SYS.
inline model::Node dgx1_v100(const std::string& name = "dgx1") {
  model::Node n = pcie_node(name, 8, kV100, 16160);
  for (int a = 0; a < 8; ++a) {
    for (int b = a + 1; b < 8; ++b) {
      n.links.set(a, b, dgx1_linked(a, b) ? nvlink(1) : pcie(model::PciePath::kSYS));
    }
  }
  return n;
}

inline model::Node t4_node(const std::string& name = "t4", int count = 4) {
  return pcie_node(name, count, kT4, 15360);
}

// A100-80GB with every GPU MIG-enabled and reconfigurable (no instances listed).
inline model::Node a100_80_mig(const std::string& name = "a100-80", int count = 2) {
  model::Node n = pcie_node(name, count, kA100_80, 81920);
  for (auto& g : n.gpus) g.mig.enabled = true;
  normalize(n);
  return n;
}

inline std::vector<model::MigInstance> layout(
    std::initializer_list<std::pair<const char*, int>> instances) {
  std::vector<model::MigInstance> out;
  for (const auto& [profile, start] : instances) out.push_back({profile, start});
  return out;
}

// A100-40GB with static MIG layouts:
//   GPU 0: 3g.20gb@0, 2g.10gb@4, 1g.5gb@6
//   GPU 1: 1g.5gb at 0..6
//   GPU 2: 4g.20gb@0, 3g.20gb@4
//   GPU 3: 1g.10gb (the 2-slice profile on this family) at 0, 2, 4, 6
inline model::Node a100_40_static(const std::string& name = "a100-40") {
  model::Node n = pcie_node(name, 4, kA100_40, 40960);
  n.gpus[0].mig = {true, layout({{"3g.20gb", 0}, {"2g.10gb", 4}, {"1g.5gb", 6}})};
  n.gpus[1].mig = {true, layout({{"1g.5gb", 0},
                                 {"1g.5gb", 1},
                                 {"1g.5gb", 2},
                                 {"1g.5gb", 3},
                                 {"1g.5gb", 4},
                                 {"1g.5gb", 5},
                                 {"1g.5gb", 6}})};
  n.gpus[2].mig = {true, layout({{"4g.20gb", 0}, {"3g.20gb", 4}})};
  n.gpus[3].mig = {true, layout({{"1g.10gb", 0}, {"1g.10gb", 2}, {"1g.10gb", 4}, {"1g.10gb", 6}})};
  normalize(n);
  return n;
}

// gpushare inventory: `count` GPUs with `capacity` aliyun.com/gpu-mem units each.
inline model::Node gpushare_node(const std::string& name = "gs", int count = 2,
                                 std::int64_t capacity = 16) {
  model::Node n = pcie_node(name, count, kT4, 0);
  n.source = model::InventorySource::kGpushare;
  for (auto& g : n.gpus) {
    g.gpushare_capacity = capacity;
    g.uuid.clear();
  }
  return n;
}

// GFD inventory with MIG known only as counts.
inline model::Node mig_pool_node(const std::string& name, const std::string& profile, int total) {
  model::Node n;
  n.name = name;
  n.source = model::InventorySource::kFeatureDiscovery;
  n.mig_pool[profile] = model::MigPool{total, 0};
  return n;
}

inline model::Node with_unhealthy(model::Node n, int gpu) {
  n.gpus[gpu].healthy = false;
  return n;
}

// --- requests -------------------------------------------------------------------------------

inline model::GpuRequest whole(int n, model::TopologyWish wish = model::TopologyWish::kNone) {
  model::GpuRequest r;
  r.kind = model::RequestKind::kWhole;
  r.whole = n;
  r.topology = wish;
  return r;
}

inline model::GpuRequest shared(std::int64_t memory_mib, int compute_milli, int count = 1) {
  model::GpuRequest r;
  r.kind = model::RequestKind::kShared;
  r.shared = {memory_mib, compute_milli, count};
  return r;
}

inline model::GpuRequest mig(const std::string& profile, int count = 1) {
  model::GpuRequest r;
  r.kind = model::RequestKind::kMig;
  r.mig_profile = profile;
  r.mig_count = count;
  return r;
}

inline model::GpuRequest gpushare(std::int64_t units) {
  model::GpuRequest r;
  r.kind = model::RequestKind::kGpushare;
  r.gpushare_units = units;
  return r;
}

// --- profiles, pods, allocations ------------------------------------------------------------

// One strategy at both levels, default weights.
inline placement::Profile profile_of(const char* strategy) {
  placement::Profile p;
  p.name = strategy;
  p.node = {{placement::find_strategy(strategy), 1.0}};
  p.gpu = {{placement::find_strategy(strategy), 1.0}};
  return p;
}
inline placement::Profile bundle() {
  return profile_of("bundle");
}
inline placement::Profile spread() {
  return profile_of("spread");
}

inline model::PodInfo pod(const std::string& uid) {
  model::PodInfo p;
  p.ns = "default";
  p.name = "pod-" + uid;
  p.uid = uid;
  return p;
}

inline model::Allocation alloc(const std::string& uid, const std::string& node) {
  model::Allocation a;
  a.pod_uid = uid;
  a.pod_ns = "default";
  a.pod_name = "pod-" + uid;
  a.node = node;
  return a;
}

inline model::GpuGrant whole_grant(int index) {
  model::GpuGrant g;
  g.index = index;
  return g;
}

inline model::GpuGrant share_grant(int index, std::int64_t memory_mib, int compute_milli) {
  model::GpuGrant g;
  g.index = index;
  g.memory_mib = memory_mib;
  g.compute_milli = compute_milli;
  return g;
}

inline model::GpuGrant gpushare_grant(int index, std::int64_t units) {
  model::GpuGrant g;
  g.index = index;
  g.gpushare_units = units;
  return g;
}

// Usage of every GPU of a node, for before/after comparisons.
inline std::vector<model::GpuUsage> usage_of(const model::Node& n) {
  std::vector<model::GpuUsage> out;
  for (const auto& g : n.gpus) out.push_back(g.used);
  return out;
}

}  // namespace gapless::testnodes
