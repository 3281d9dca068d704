// Inventory changes under allocations (upsert_node, remove_node), deterministic iteration,
// node_fill and GpuRequest::units.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "../placement/test_nodes.h"
#include "gapless/model/cluster.h"
#include "gapless/model/node.h"
#include "gapless/model/request.h"

namespace {

using namespace gapless::testnodes;
using gapless::model::Allocation;
using gapless::model::Cluster;
using gapless::model::GpuUsage;
using gapless::model::Node;

Allocation with_gpus(const std::string& uid, const std::string& node,
                     std::vector<gapless::model::GpuGrant> grants) {
  Allocation a = alloc(uid, node);
  a.gpus = std::move(grants);
  return a;
}

Node shrunk_t4(int count) {
  Node n = t4_node("t4", count);
  return n;
}

bool all_idle(const Node& n) {
  for (const auto& g : n.gpus) {
    if (!g.used.idle() || g.used.shared_pods != 0 || g.used.memory_used_mib != 0 ||
        g.used.compute_used_milli != 0 || g.used.mig_compute_used != 0 ||
        g.used.mig_media_used != 0) {
      return false;
    }
  }
  return true;
}

}  // namespace

TEST_CASE("upsert_node re-applies the allocations already on the node", "[model][inventory]") {
  Cluster c;
  c.upsert_node(t4_node("t4"));
  REQUIRE(c.commit(with_gpus("w", "t4", {whole_grant(1)})));
  REQUIRE(c.commit(with_gpus("s", "t4", {share_grant(2, 4096, 250)})));
  const auto before = usage_of(*c.find_node("t4"));

  Node fresh = t4_node("t4");
  fresh.gpus[0].used.whole = true;  // stale counters in the input are ignored
  fresh.gpus[3].used.memory_used_mib = 999;
  c.upsert_node(fresh);
  CHECK(usage_of(*c.find_node("t4")) == before);
  CHECK_FALSE(c.find_node("t4")->fenced());
  CHECK(c.allocation_count() == 2);
  CHECK(c.release("w"));
  CHECK(c.release("s"));
  CHECK(all_idle(*c.find_node("t4")));
}

TEST_CASE("inventory shrinking under an allocation fences the node", "[model][inventory]") {
  Cluster c;
  c.upsert_node(t4_node("t4", 4));
  c.upsert_node(t4_node("other", 4));
  REQUIRE(c.commit(with_gpus("a-low", "t4", {whole_grant(0)})));
  REQUIRE(c.commit(with_gpus("b-high", "t4", {whole_grant(1), whole_grant(3)})));
  REQUIRE(c.commit(with_gpus("c-other", "other", {whole_grant(3)})));

  c.upsert_node(shrunk_t4(2));  // GPUs 2 and 3 vanish
  const Node& n = *c.find_node("t4");
  REQUIRE(n.gpus.size() == 2);
  CHECK(n.fenced());
  CHECK_THAT(n.fence_reason, Catch::Contains("pod-b-high"));
  CHECK(c.allocation_count() == 3);              // nothing silently dropped
  CHECK(c.find_node("t4")->gpus[0].used.whole);  // the allocation that still fits is applied
  CHECK_FALSE(c.commit(with_gpus("new", "t4", {whole_grant(1)})).ok());  // fenced

  SECTION("releasing the stranded allocation does not touch the counters") {
    const auto before = usage_of(*c.find_node("t4"));
    CHECK(c.release("b-high"));
    CHECK(usage_of(*c.find_node("t4")) == before);
    CHECK(c.release("a-low"));
    CHECK(all_idle(*c.find_node("t4")));
    CHECK(c.find_node("other")->gpus[3].used.whole);  // other nodes untouched
    CHECK_FALSE(c.release("b-high"));
  }
  SECTION("restoring the inventory re-applies the stranded allocation") {
    c.upsert_node(t4_node("t4", 4));
    const Node& back = *c.find_node("t4");
    CHECK(back.gpus[0].used.whole);
    CHECK(back.gpus[1].used.whole);
    CHECK(back.gpus[3].used.whole);
    CHECK(back.gpus[2].used.idle());
    CHECK(c.release("b-high"));
    CHECK(c.release("a-low"));
    CHECK(all_idle(*c.find_node("t4")));
  }
  SECTION("shrinking twice keeps the allocation stranded once") {
    c.upsert_node(shrunk_t4(1));
    c.upsert_node(shrunk_t4(2));
    CHECK(c.release("b-high"));
    CHECK(c.release("a-low"));
    CHECK(all_idle(*c.find_node("t4")));
  }
}

TEST_CASE("other inventory changes under allocations strand them", "[model][inventory]") {
  Cluster c;
  SECTION("a GPU's UUID changes") {
    c.upsert_node(t4_node("t4"));
    auto g = whole_grant(2);
    g.uuid = c.find_node("t4")->gpus[2].uuid;
    REQUIRE(c.commit(with_gpus("p", "t4", {g})));
    Node n = t4_node("t4");
    n.gpus[2].uuid = "GPU-replaced";
    c.upsert_node(n);
    CHECK(c.find_node("t4")->fenced());
    CHECK(c.find_node("t4")->gpus[2].used.idle());
    CHECK(c.release("p"));
    CHECK(all_idle(*c.find_node("t4")));
  }
  SECTION("a static MIG layout changes") {
    c.upsert_node(a100_40_static("m"));
    Allocation a = alloc("p", "m");
    a.mig = {{2, "4g.20gb", 0}};
    REQUIRE(c.commit(a));
    Node n = a100_40_static("m");
    n.gpus[2].mig.instances = {{"3g.20gb", 0}, {"3g.20gb", 4}};
    normalize(n);
    c.upsert_node(n);
    CHECK(c.find_node("m")->fenced());
    CHECK(c.release("p"));
    CHECK(all_idle(*c.find_node("m")));
  }
  SECTION("a MIG pool shrinks") {
    c.upsert_node(mig_pool_node("pool", "1g.10gb", 2));
    Allocation a = alloc("p", "pool");
    a.mig = {{-1, "1g.10gb", -1}};
    Allocation b = alloc("q", "pool");
    b.mig = {{-1, "1g.10gb", -1}};
    REQUIRE(c.commit(a));
    REQUIRE(c.commit(b));
    c.upsert_node(mig_pool_node("pool", "1g.10gb", 1));
    CHECK(c.find_node("pool")->fenced());
    CHECK(c.find_node("pool")->mig_pool.at("1g.10gb").used == 1);
    CHECK(c.release("q"));  // the stranded one (UID order: p applied first)
    CHECK(c.find_node("pool")->mig_pool.at("1g.10gb").used == 1);
    CHECK(c.release("p"));
    CHECK(c.find_node("pool")->mig_pool.at("1g.10gb").used == 0);
  }
}

TEST_CASE("upsert_node keeps an existing fence unless the new node sets one",
          "[model][inventory]") {
  Cluster c;
  c.upsert_node(t4_node("t4"));
  c.fence("t4", "record unreadable");
  c.upsert_node(t4_node("t4"));
  CHECK(c.find_node("t4")->fence_reason == "record unreadable");
  Node n = t4_node("t4");
  n.fence_reason = "newer reason";
  c.upsert_node(n);
  CHECK(c.find_node("t4")->fence_reason == "newer reason");
}

TEST_CASE("remove_node drops the node and its allocations", "[model][inventory]") {
  Cluster c;
  c.upsert_node(t4_node("a"));
  c.upsert_node(t4_node("b"));
  REQUIRE(c.commit(with_gpus("pa", "a", {whole_grant(0)})));
  REQUIRE(c.commit(with_gpus("pb", "b", {whole_grant(0)})));
  c.upsert_node(t4_node("a", 0));  // strand pa too: remove must clean that up as well
  CHECK(c.remove_node("a"));
  CHECK_FALSE(c.remove_node("a"));
  CHECK(c.find_node("a") == nullptr);
  CHECK(c.node_count() == 1);
  CHECK(c.allocation("pa") == nullptr);
  CHECK_FALSE(c.release("pa"));
  CHECK(c.allocation("pb") != nullptr);
  CHECK(c.allocation_count() == 1);

  c.upsert_node(t4_node("a"));  // comes back empty
  CHECK(all_idle(*c.find_node("a")));
  CHECK_FALSE(c.find_node("a")->fenced());
  CHECK(c.commit(with_gpus("pa", "a", {whole_grant(0)})).ok());
}

TEST_CASE("nodes() and allocations() iterate in name / UID order", "[model][inventory]") {
  Cluster c;
  for (const char* name : {"m", "z", "a", "k"}) c.upsert_node(t4_node(name));
  std::vector<std::string> names;
  for (const Node* n : c.nodes()) names.push_back(n->name);
  CHECK(names == std::vector<std::string>{"a", "k", "m", "z"});
  int gpu = 0;
  for (const char* uid : {"u3", "u1", "u4", "u2"}) {
    REQUIRE(c.commit(with_gpus(uid, "a", {whole_grant(gpu++)})));
  }
  std::vector<std::string> uids;
  for (const Allocation* a : c.allocations()) uids.push_back(a->pod_uid);
  CHECK(uids == std::vector<std::string>{"u1", "u2", "u3", "u4"});
  CHECK(c.find_node("nope") == nullptr);
  CHECK(c.allocation("nope") == nullptr);
}

TEST_CASE("node_fill counts healthy GPUs and capacity in use", "[model][inventory]") {
  Cluster c;
  c.upsert_node(with_unhealthy(t4_node("t4"), 3));
  c.upsert_node(a100_80_mig("mig", 2));
  auto f = gapless::model::node_fill(*c.find_node("t4"));
  CHECK(f.gpus == 3);
  CHECK(f.idle == 3);
  CHECK(f.used == 0.0);
  REQUIRE(c.commit(with_gpus("w", "t4", {whole_grant(0)})));
  REQUIRE(c.commit(with_gpus("s", "t4", {share_grant(1, 15360 / 4, 500)})));
  f = gapless::model::node_fill(*c.find_node("t4"));
  CHECK(f.idle == 1);
  CHECK(f.used == Approx(1.5));

  Allocation m = alloc("m", "mig");
  m.mig = {{0, "3g.40gb", 0}, {0, "4g.40gb", 0}};  // overlapping: refused
  CHECK_FALSE(c.commit(m));
  m.mig = {{0, "4g.40gb", 0}};
  REQUIRE(c.commit(m));
  f = gapless::model::node_fill(*c.find_node("mig"));
  CHECK(f.gpus == 2);
  CHECK(f.idle == 1);
  CHECK(f.used == Approx(4.0 / 7.0));
}

TEST_CASE("GpuRequest::units per kind", "[model][request]") {
  CHECK(whole(4).units() == 4);
  CHECK(shared(1024, 0, 3).units() == 3);
  CHECK(mig("1g.10gb", 5).units() == 5);
  CHECK(gpushare(7).units() == 1);
  CHECK(gapless::model::GpuRequest{}.units() == 0);
}
