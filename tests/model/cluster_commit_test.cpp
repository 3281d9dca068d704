// Cluster::commit / restore / release for whole GPUs, shares and gpushare units: capacity
// bounds, all-or-nothing application, double commits, fencing and exact release.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "../placement/test_nodes.h"
#include "gapless/model/cluster.h"

namespace {

using namespace gapless::testnodes;
using gapless::Status;
using gapless::model::Allocation;
using gapless::model::Cluster;
using gapless::model::GpuUsage;

Cluster make_cluster() {
  Cluster c;
  c.upsert_node(t4_node("t4"));
  c.upsert_node(h100_nvswitch("h100"));
  c.upsert_node(gpushare_node("gs", 2, 16));
  c.upsert_node(a100_80_mig("mig", 2));
  return c;
}

const GpuUsage& used(const Cluster& c, const std::string& node, int gpu) {
  return c.find_node(node)->gpus[gpu].used;
}

Allocation with_gpus(const std::string& uid, const std::string& node,
                     std::vector<gapless::model::GpuGrant> grants) {
  Allocation a = alloc(uid, node);
  a.gpus = std::move(grants);
  return a;
}

}  // namespace

TEST_CASE("whole GPUs: commit takes them, release frees them", "[model][cluster]") {
  Cluster c = make_cluster();
  const auto before = usage_of(*c.find_node("h100"));
  REQUIRE(c.commit(with_gpus("p1", "h100", {whole_grant(0), whole_grant(5)})));
  CHECK(used(c, "h100", 0).whole);
  CHECK(used(c, "h100", 5).whole);
  CHECK_FALSE(used(c, "h100", 0).idle());
  CHECK(used(c, "h100", 1).idle());
  CHECK(c.allocation_count() == 1);
  REQUIRE(c.allocation("p1") != nullptr);
  CHECK(c.allocation("p1")->gpus.size() == 2);

  SECTION("a held GPU refuses another whole grant, a share and gpushare units") {
    const auto held = usage_of(*c.find_node("h100"));
    for (const auto& g : {whole_grant(0), share_grant(0, 1024, 100), gpushare_grant(5, 1)}) {
      Status s = c.commit(with_gpus("p2", "h100", {g}));
      CHECK_FALSE(s.ok());
      CHECK_FALSE(s.error().empty());
    }
    CHECK(usage_of(*c.find_node("h100")) == held);
    CHECK(c.allocation("p2") == nullptr);
  }
  SECTION("release restores the exact previous usage") {
    CHECK(c.release("p1"));
    CHECK(usage_of(*c.find_node("h100")) == before);
    CHECK(c.allocation_count() == 0);
    CHECK_FALSE(c.release("p1"));
  }
}

TEST_CASE("shares are bounded by vRAM and compute", "[model][cluster]") {
  Cluster c = make_cluster();
  const auto before = usage_of(*c.find_node("h100"));
  REQUIRE(c.commit(with_gpus("a", "h100", {share_grant(0, 40000, 300)})));
  REQUIRE(c.commit(with_gpus("b", "h100", {share_grant(0, 41559, 700)})));
  const GpuUsage& u = used(c, "h100", 0);
  CHECK(u.shared_pods == 2);
  CHECK(u.memory_used_mib == 81559);
  CHECK(u.compute_used_milli == 1000);
  CHECK_FALSE(u.whole);
  CHECK(c.find_node("h100")->gpus[0].memory_free_mib() == 0);
  CHECK(c.find_node("h100")->gpus[0].compute_free_milli() == 0);

  const auto full = usage_of(*c.find_node("h100"));
  auto [mem, compute, words] = GENERATE(table<std::int64_t, int, const char*>({
      {1, 0, "vRAM"},      // memory only, one MiB too much
      {0, 1, "compute"},   // compute only, one milli too much
      {0, 0, "not free"},  // a whole grant on a shared GPU
  }));
  Status s = c.commit(with_gpus("c", "h100", {share_grant(0, mem, compute)}));
  CHECK_FALSE(s.ok());
  CHECK_THAT(s.error(), Catch::Contains(words));
  CHECK(usage_of(*c.find_node("h100")) == full);

  CHECK(c.release("a"));
  CHECK(used(c, "h100", 0).shared_pods == 1);
  CHECK(used(c, "h100", 0).memory_used_mib == 41559);
  CHECK(used(c, "h100", 0).compute_used_milli == 700);
  CHECK(c.release("b"));
  CHECK(usage_of(*c.find_node("h100")) == before);
}

TEST_CASE("share bounds apply per dimension", "[model][cluster]") {
  Cluster c = make_cluster();
  SECTION("compute-only shares up to 1000 milli") {
    for (int i = 0; i < 4; ++i) {
      REQUIRE(c.commit(with_gpus("q" + std::to_string(i), "t4", {share_grant(1, 0, 250)})));
    }
    CHECK(used(c, "t4", 1).shared_pods == 4);
    CHECK_FALSE(c.commit(with_gpus("q4", "t4", {share_grant(1, 0, 1)})));
    CHECK(c.commit(with_gpus("q5", "t4", {share_grant(1, 15360, 0)})));  // memory still free
  }
  SECTION("more vRAM than the GPU has is refused even on an idle GPU") {
    CHECK_FALSE(c.commit(with_gpus("q", "t4", {share_grant(0, 15361, 0)})));
    CHECK(used(c, "t4", 0).idle());
  }
  SECTION("negative shares are refused") {
    CHECK_FALSE(c.commit(with_gpus("q", "t4", {share_grant(0, -1, 100)})));
    CHECK_FALSE(c.commit(with_gpus("q", "t4", {share_grant(0, 100, -1)})));
    CHECK_FALSE(c.commit(with_gpus("q", "gs", {gpushare_grant(0, -1)})));
    CHECK(used(c, "t4", 0).idle());
  }
}

TEST_CASE("gpushare units are bounded by the GPU's capacity", "[model][cluster]") {
  Cluster c = make_cluster();
  const auto before = usage_of(*c.find_node("gs"));
  REQUIRE(c.commit(with_gpus("a", "gs", {gpushare_grant(1, 10)})));
  REQUIRE(c.commit(with_gpus("b", "gs", {gpushare_grant(1, 6)})));
  CHECK(used(c, "gs", 1).gpushare_used == 16);
  CHECK(used(c, "gs", 1).shared_pods == 0);
  CHECK_FALSE(c.commit(with_gpus("c", "gs", {gpushare_grant(1, 1)})));
  CHECK_FALSE(c.commit(with_gpus("c", "gs", {whole_grant(1)})));
  CHECK_FALSE(c.commit(with_gpus("c", "gs", {gpushare_grant(0, 17)})));
  CHECK(c.commit(with_gpus("c", "gs", {gpushare_grant(0, 16)})));
  // A GPU with no gpushare capacity takes no units.
  CHECK_FALSE(c.commit(with_gpus("d", "t4", {gpushare_grant(0, 1)})));
  CHECK(c.release("a"));
  CHECK(c.release("b"));
  CHECK(c.release("c"));
  CHECK(usage_of(*c.find_node("gs")) == before);
}

TEST_CASE("whole, share and gpushare grants are refused on MIG GPUs", "[model][cluster]") {
  Cluster c = make_cluster();
  for (const auto& g : {whole_grant(0), share_grant(0, 1024, 100), gpushare_grant(0, 1)}) {
    Status s = c.commit(with_gpus("p", "mig", {g}));
    CHECK_FALSE(s.ok());
    CHECK_THAT(s.error(), Catch::Contains("MIG mode"));
  }
  CHECK(used(c, "mig", 0).idle());
}

TEST_CASE("an allocation applies completely or not at all", "[model][cluster]") {
  Cluster c = make_cluster();
  REQUIRE(c.commit(with_gpus("holder", "h100", {whole_grant(3)})));
  REQUIRE(c.commit(with_gpus("sharer", "h100", {share_grant(6, 80000, 500)})));
  const auto before = usage_of(*c.find_node("h100"));

  const std::vector<std::vector<gapless::model::GpuGrant>> failing = {
      {whole_grant(0), whole_grant(3)},                        // 2nd GPU held
      {whole_grant(0), whole_grant(1), whole_grant(0)},        // same GPU twice
      {share_grant(0, 1000, 100), share_grant(6, 2000, 100)},  // 2nd share lacks vRAM
      {share_grant(0, 1000, 100), share_grant(0, 1000, 901)},  // together over compute
      {whole_grant(0), whole_grant(8)},                        // 2nd GPU does not exist
      {whole_grant(0), whole_grant(-1)},
  };
  for (std::size_t i = 0; i < failing.size(); ++i) {
    INFO("case " << i);
    CHECK_FALSE(c.commit(with_gpus("p", "h100", failing[i])).ok());
    CHECK(usage_of(*c.find_node("h100")) == before);
    CHECK(c.allocation("p") == nullptr);
  }
  CHECK(c.allocation_count() == 2);
}

TEST_CASE("a pod commits at most once", "[model][cluster]") {
  Cluster c = make_cluster();
  REQUIRE(c.commit(with_gpus("p", "h100", {whole_grant(0)})));
  const auto h100 = usage_of(*c.find_node("h100"));
  const auto t4 = usage_of(*c.find_node("t4"));
  Status s = c.commit(with_gpus("p", "t4", {whole_grant(1)}));
  CHECK_FALSE(s.ok());
  CHECK_THAT(s.error(), Catch::Contains("already holds"));
  CHECK_FALSE(c.restore(with_gpus("p", "h100", {whole_grant(1)})).ok());
  CHECK(usage_of(*c.find_node("h100")) == h100);
  CHECK(usage_of(*c.find_node("t4")) == t4);
  CHECK(c.allocation("p")->node == "h100");
}

TEST_CASE("malformed allocations are refused", "[model][cluster]") {
  Cluster c = make_cluster();
  SECTION("no pod UID") {
    CHECK_FALSE(c.commit(with_gpus("", "t4", {whole_grant(0)})).ok());
  }
  SECTION("unknown node") {
    CHECK_FALSE(c.commit(with_gpus("p", "nowhere", {whole_grant(0)})).ok());
    CHECK_FALSE(c.restore(with_gpus("p", "nowhere", {whole_grant(0)})).ok());
  }
  SECTION("UUID of another GPU") {
    auto g = whole_grant(0);
    g.uuid = c.find_node("t4")->gpus[1].uuid;
    CHECK_THAT(c.commit(with_gpus("p", "t4", {g})).error(), Catch::Contains("UUID"));
  }
  SECTION("matching or empty UUID is accepted") {
    auto g = whole_grant(0);
    g.uuid = c.find_node("t4")->gpus[0].uuid;
    CHECK(c.commit(with_gpus("p", "t4", {g})).ok());
    CHECK(c.commit(with_gpus("q", "t4", {whole_grant(1)})).ok());
  }
  CHECK(c.allocation_count() <= 2);
}

TEST_CASE("a fenced node refuses commits but accepts restores", "[model][cluster]") {
  Cluster c = make_cluster();
  c.fence("t4", "allocation record of pod x unreadable");
  REQUIRE(c.find_node("t4")->fenced());
  Status s = c.commit(with_gpus("p", "t4", {whole_grant(0)}));
  CHECK_FALSE(s.ok());
  CHECK_THAT(s.error(), Catch::Contains("fenced") && Catch::Contains("unreadable"));
  CHECK(used(c, "t4", 0).idle());

  REQUIRE(c.restore(with_gpus("p", "t4", {whole_grant(0)})));
  CHECK(used(c, "t4", 0).whole);
  // Restore still refuses over-commit.
  CHECK_FALSE(c.restore(with_gpus("q", "t4", {whole_grant(0)})).ok());
  CHECK(c.allocation("q") == nullptr);
  // Release works on a fenced node too.
  CHECK(c.release("p"));
  CHECK(used(c, "t4", 0).idle());

  c.fence("t4", "");  // an empty reason lifts the fence
  CHECK_FALSE(c.find_node("t4")->fenced());
  CHECK(c.commit(with_gpus("p", "t4", {whole_grant(0)})).ok());
  c.fence("nowhere", "ignored");  // unknown nodes are ignored
  CHECK(c.find_node("nowhere") == nullptr);
}

TEST_CASE("releasing in any order returns to the earlier state", "[model][cluster]") {
  Cluster c = make_cluster();
  REQUIRE(c.commit(with_gpus("base", "h100", {share_grant(2, 1000, 100)})));
  const auto before = usage_of(*c.find_node("h100"));
  REQUIRE(c.commit(with_gpus("w", "h100", {whole_grant(0), whole_grant(1)})));
  REQUIRE(c.commit(with_gpus("s1", "h100", {share_grant(2, 2000, 200), share_grant(3, 10, 0)})));
  REQUIRE(c.commit(with_gpus("s2", "h100", {share_grant(3, 0, 999)})));
  std::vector<std::string> order = {"s1", "w", "s2"};
  SECTION("forward") {}
  SECTION("reverse") {
    std::reverse(order.begin(), order.end());
  }
  for (const auto& uid : order) CHECK(c.release(uid));
  CHECK(usage_of(*c.find_node("h100")) == before);
  CHECK(c.allocation_count() == 1);
}
