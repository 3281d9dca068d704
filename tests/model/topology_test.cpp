// Link weights, PCIe path words and the LinkGraph, plus the shape of the test nodes' graphs.
#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "../placement/test_nodes.h"
#include "gapless/model/topology.h"

namespace {

using gapless::model::Link;
using gapless::model::LinkGraph;
using gapless::model::parse_pcie_path;
using gapless::model::PciePath;
using gapless::testnodes::nvlink;
using gapless::testnodes::pcie;

Link degraded_nvlink(int count) {
  Link l = nvlink(count);
  l.degraded = true;
  return l;
}

}  // namespace

TEST_CASE("PCIe path words round-trip", "[model][topology]") {
  auto [word, path] = GENERATE(table<const char*, PciePath>({
      {"PIX", PciePath::kPIX},
      {"PXB", PciePath::kPXB},
      {"PHB", PciePath::kPHB},
      {"NODE", PciePath::kNODE},
      {"SYS", PciePath::kSYS},
  }));
  PciePath out = PciePath::kPIX;
  REQUIRE(parse_pcie_path(word, &out));
  CHECK(out == path);
  CHECK(gapless::model::to_string(path) == word);
}

TEST_CASE("unknown PCIe path words are rejected", "[model][topology]") {
  const char* word = GENERATE("pix", "Sys", "", "NV12", "SOC", "PIX ");
  PciePath out = PciePath::kNODE;
  CHECK_FALSE(parse_pcie_path(word, &out));
  CHECK(out == PciePath::kNODE);  // untouched on failure
}

TEST_CASE("link weights: any NVLink > PIX > PXB > PHB > NODE > SYS", "[model][topology]") {
  // Best first.
  const std::vector<Link> order = {nvlink(18),
                                   nvlink(12),
                                   nvlink(4),
                                   nvlink(1),
                                   pcie(PciePath::kPIX),
                                   pcie(PciePath::kPXB),
                                   pcie(PciePath::kPHB),
                                   pcie(PciePath::kNODE),
                                   pcie(PciePath::kSYS)};
  for (std::size_t i = 0; i + 1 < order.size(); ++i) {
    INFO("position " << i);
    CHECK(order[i].weight() >= order[i + 1].weight());
  }
  // Strict between kinds / paths; lane counts may saturate (18 and 12 both max out).
  for (std::size_t i = 3; i + 1 < order.size(); ++i) {
    INFO("position " << i);
    CHECK(order[i].weight() > order[i + 1].weight());
  }
  CHECK(nvlink(4).weight() > nvlink(1).weight());
  for (const Link& l : order) {
    CHECK(l.weight() >= 0);
    CHECK(l.weight() <= Link::kMaxWeight);
  }
}

TEST_CASE("link weights are go-gpuallocator's pair scores", "[model][topology]") {
  CHECK(nvlink(1).weight() == 100);
  CHECK(nvlink(2).weight() == 200);
  CHECK(nvlink(12).weight() == 1200);
  CHECK(nvlink(18).weight() == 1200);  // capped
  CHECK(pcie(PciePath::kPIX).weight() == 50);
  CHECK(pcie(PciePath::kPXB).weight() == 40);
  CHECK(pcie(PciePath::kPHB).weight() == 30);
  CHECK(pcie(PciePath::kNODE).weight() == 20);
  CHECK(pcie(PciePath::kSYS).weight() == 10);
}

TEST_CASE("degraded or empty NVLink counts as the worst link", "[model][topology]") {
  const Link sys = pcie(PciePath::kSYS);
  for (const Link& bad : {degraded_nvlink(18), degraded_nvlink(1), nvlink(0)}) {
    CHECK_FALSE(bad.is_nvlink());
    CHECK(bad.weight() <= sys.weight());
    CHECK(bad.weight() < pcie(PciePath::kNODE).weight());
  }
  CHECK(nvlink(1).is_nvlink());
  CHECK_FALSE(sys.is_nvlink());
  CHECK_FALSE(pcie(PciePath::kPIX).is_nvlink());
}

TEST_CASE("a default link is PCIe SYS", "[model][topology]") {
  const Link l;
  CHECK(l.kind == Link::Kind::kPCIe);
  CHECK(l.path == PciePath::kSYS);
  CHECK_FALSE(l.is_nvlink());
}

TEST_CASE("LinkGraph: unset pairs are SYS, links are symmetric and replaceable",
          "[model][topology]") {
  LinkGraph g(4);
  CHECK(g.size() == 4);
  CHECK(LinkGraph().size() == 0);
  for (int a = 0; a < 4; ++a) {
    for (int b = 0; b < 4; ++b) {
      if (a == b) continue;
      CHECK(g.get(a, b).kind == Link::Kind::kPCIe);
      CHECK(g.get(a, b).path == PciePath::kSYS);
    }
    CHECK(g.nvlink_degree(a) == 0);
  }
  g.set(0, 1, nvlink(2));
  g.set(3, 2, pcie(PciePath::kPIX));
  CHECK(g.get(1, 0).is_nvlink());
  CHECK(g.get(0, 1).nvlink_count == 2);
  CHECK(g.get(2, 3).path == PciePath::kPIX);
  CHECK(g.nvlink_degree(0) == 1);
  CHECK(g.nvlink_degree(1) == 1);
  CHECK(g.nvlink_degree(2) == 0);

  g.set(1, 0, pcie(PciePath::kPHB));  // replaces, in either direction
  CHECK_FALSE(g.get(0, 1).is_nvlink());
  CHECK(g.get(0, 1).path == PciePath::kPHB);
  CHECK(g.nvlink_degree(0) == 0);

  g.set(0, 2, degraded_nvlink(4));
  CHECK(g.nvlink_degree(0) == 0);  // degraded links are not NVLink neighbours
}

TEST_CASE("test node graphs have the intended shapes", "[model][topology]") {
  using namespace gapless::testnodes;
  SECTION("H100 NVSwitch: every pair NVLink x18") {
    const auto n = h100_nvswitch();
    REQUIRE(n.links.size() == 8);
    for (int a = 0; a < 8; ++a) {
      CHECK(n.links.nvlink_degree(a) == 7);
      for (int b = 0; b < 8; ++b) {
        if (a != b) CHECK(n.links.get(a, b).nvlink_count == 18);
      }
    }
  }
  SECTION("DGX-1 hybrid cube-mesh: degree 4, quads fully linked") {
    const auto n = dgx1_v100();
    REQUIRE(n.links.size() == 8);
    for (int a = 0; a < 8; ++a) {
      CHECK(n.links.nvlink_degree(a) == 4);
      for (int b = 0; b < 8; ++b) {
        if (a != b) CHECK(n.links.get(a, b).is_nvlink() == dgx1_linked(a, b));
      }
    }
    CHECK(n.links.get(0, 4).is_nvlink());
    CHECK_FALSE(n.links.get(0, 5).is_nvlink());
    CHECK(n.links.get(0, 5).path == PciePath::kSYS);
  }
  SECTION("T4: no NVLink") {
    const auto n = t4_node();
    REQUIRE(n.links.size() == 4);
    for (int a = 0; a < 4; ++a) CHECK(n.links.nvlink_degree(a) == 0);
  }
}

TEST_CASE("LinkGraph caches agree with the links", "[model][topology]") {
  using namespace gapless::testnodes;
  for (const auto& n : {h100_nvswitch(), dgx1_v100(), t4_node()}) {
    const LinkGraph& g = n.links;
    for (int a = 0; a < g.size(); ++a) {
      std::uint64_t mask = 0;
      CHECK(g.weight(a, a) == 0);
      for (int b = 0; b < g.size(); ++b) {
        if (a == b) continue;
        CHECK(g.weight(a, b) == g.get(a, b).weight());
        CHECK(g.weight(a, b) == g.weight(b, a));
        if (g.get(a, b).is_nvlink()) mask |= std::uint64_t{1} << b;
      }
      CHECK(g.nvlink_mask(a) == mask);
    }
  }
  LinkGraph g(3);
  g.set(0, 2, nvlink(4));
  CHECK(g.nvlink_mask(0) == 0b100);
  CHECK(g.nvlink_mask(2) == 0b001);
  g.set(2, 0, pcie(PciePath::kPXB));  // replacing clears the NVLink bit and updates the weight
  CHECK(g.nvlink_mask(0) == 0);
  CHECK(g.nvlink_mask(2) == 0);
  CHECK(g.weight(0, 2) == pcie(PciePath::kPXB).weight());
  const LinkGraph copy = g;  // caches travel with copies
  CHECK(copy.weight(2, 0) == pcie(PciePath::kPXB).weight());
  CHECK(LinkGraph(gapless::model::LinkGraph::kMaxGpus).size() == 64);
}
