// End to end: the node model built from the agent's annotation lets the engine make an
// NVLink-aware choice that the same box described by GPU Feature Discovery labels alone
// cannot (GFD says "8 x V100", nothing about links).
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "fake_nvml.h"
#include "gapless/agent/gpu_scan.h"
#include "gapless/agent/topology_annotation.h"
#include "gapless/k8s/node_inventory.h"
#include "gapless/model/cluster.h"
#include "gapless/placement/engine.h"
#include "gapless/placement/profile.h"

namespace {

using namespace gapless;

model::GpuRequest pair_request(model::TopologyWish wish) {
  model::GpuRequest r;
  r.kind = model::RequestKind::kWhole;
  r.whole = 2;
  r.topology = wish;
  return r;
}

Result<model::Allocation> place_on(const model::Node& node, model::TopologyWish wish) {
  static const placement::Policy policy = placement::builtin_policy();
  model::Cluster c;
  c.upsert_node(node);
  model::PodInfo pod;
  pod.ns = "default";
  pod.name = "trainer";
  pod.uid = "uid-trainer";
  return placement::place(c, pair_request(wish), policy.profiles.at(0), pod, node.name);
}

model::Node agent_node() {
  auto lib = test::open_fake_nvml("dgx1-v100");
  agent::GpuScanner scanner(*lib, nullptr);
  auto gpus = scanner.scan();
  REQUIRE(gpus.ok());
  return test::parse_annotation("dgx1", agent::topology_annotation(*gpus));
}

model::Node gfd_node() {
  const nlohmann::json n = {{"metadata",
                             {{"name", "dgx1"},
                              {"labels",
                               {{"nvidia.com/gpu.product", "Tesla-V100-SXM2-32GB"},
                                {"nvidia.com/gpu.memory", "32768"},
                                {"nvidia.com/gpu.count", "8"}}}}},
                            {"status", {{"allocatable", {{"nvidia.com/gpu", "8"}}}}}};
  auto r = k8s::node_from_json(n);
  REQUIRE(r.ok());
  return std::move(r).value();
}

}  // namespace

TEST_CASE("a 2-GPU pod gets an NVLink pair from the agent's DGX-1 model, not from GFD labels") {
  const model::Node agent = agent_node();
  auto chosen = place_on(agent, model::TopologyWish::kNvlinkRequired);
  REQUIRE(chosen.ok());
  REQUIRE(chosen->gpus.size() == 2);
  const model::Link link = agent.links.get(chosen->gpus[0].index, chosen->gpus[1].index);
  CHECK(link.is_nvlink());
  CHECK(link.nvlink_count == 2);  // the DGX-1's double links are the best pairs

  const model::Node gfd = gfd_node();
  REQUIRE(gfd.gpus.size() == 8);
  CHECK_FALSE(place_on(gfd, model::TopologyWish::kNvlinkRequired).ok());
}
