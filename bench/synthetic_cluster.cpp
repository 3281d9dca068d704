#include "synthetic_cluster.h"

#include <cstdio>
#include <random>
#include <string>

#include "gapless/k8s/pod_request.h"
#include "gapless/placement/engine.h"
#include "pod_stream.h"

namespace gapless::bench {
namespace {

model::Node make_node(const std::string& name, int kind) {
  model::Node n;
  n.name = name;
  static const char* kModels[] = {"NVIDIA-H100-80GB-HBM3", "Tesla-V100-SXM2-32GB",
                                  "NVIDIA-A100-SXM4-80GB", "Tesla-T4"};
  static const std::int64_t kMem[] = {81559, 32768, 81920, 15360};
  for (int i = 0; i < 8; ++i) {
    model::Gpu g;
    g.index = i;
    g.uuid = "GPU-" + name + "-" + std::to_string(i);
    g.model = kModels[kind];
    g.memory_mib = kMem[kind];
    g.numa = i / 4;
    g.mig_family = model::mig_family_of(g.model);
    g.mig.enabled = kind == 2 && i >= 4;  // half of each A100 node is MIG, reconfigurable
    n.gpus.push_back(g);
  }
  n.links = model::LinkGraph(8);
  for (int a = 0; a < 8; ++a) {
    for (int b = a + 1; b < 8; ++b) {
      model::Link l;
      if (kind == 0 || kind == 2) {  // NVSwitch: all-to-all
        l.kind = model::Link::Kind::kNVLink;
        l.nvlink_count = 18;
      } else if (kind == 1 && (a / 4 == b / 4 || b == a + 4)) {  // DGX-1 hybrid cube-mesh
        l.kind = model::Link::Kind::kNVLink;
        l.nvlink_count = (b == a + 4 || b == a + 1) ? 2 : 1;
      } else {
        l.path = a / 4 == b / 4 ? model::PciePath::kNODE : model::PciePath::kSYS;
      }
      n.links.set(a, b, l);
    }
  }
  return n;
}

}  // namespace

model::Cluster synthetic_cluster(int nodes, double fill, std::uint32_t seed,
                                 std::vector<BoundPod>* bound) {
  model::Cluster c;
  char name[32];
  for (int i = 0; i < nodes; ++i) {
    std::snprintf(name, sizeof name, "node-%05d", i);
    c.upsert_node(make_node(name, i % 4));
  }
  std::mt19937 rng(seed);
  const placement::Policy policy = placement::builtin_policy();
  const auto target = static_cast<long>(fill * nodes * 8);
  // The running pods are of the same workload as the pods that arrive (pod_stream's shapes,
  // CPU and memory included), as in a cluster that has been running a while: the mix learned
  // from them is the one the stream meets.
  const std::vector<StreamPod> pods = pod_stream(static_cast<int>(target), seed + 1);
  long placed = 0;
  for (long pod = 0; placed < target && pod < target * 4; ++pod) {
    auto parsed = k8s::parse_pod(pods[static_cast<std::size_t>(pod) % pods.size()].pod);
    if (!parsed) continue;
    const model::GpuRequest& req = parsed->request;
    char node[32];
    std::snprintf(node, sizeof node, "node-%05d", static_cast<int>(rng() % nodes));
    model::PodInfo info = parsed->info;
    info.name = "fill-" + std::to_string(pod);
    info.uid = "uid-fill-" + std::to_string(pod);
    auto a = placement::place(c, req, policy.profiles[0], info, node);
    if (!a || !c.commit(*a)) continue;
    placed += req.kind == model::RequestKind::kWhole ? req.whole : 1;
    if (bound != nullptr) bound->emplace_back(info, req);
  }
  return c;
}

}  // namespace gapless::bench
