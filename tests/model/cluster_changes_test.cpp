// Cluster::take_changes lists the pods whose allocation changed (what placement::Scheduler's
// quota ledger re-reads): commits, restores, releases, and allocations dropped with their node.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "../placement/test_nodes.h"
#include "gapless/model/cluster.h"

namespace {

using namespace gapless::testnodes;
using gapless::model::Allocation;
using gapless::model::Cluster;

Allocation on(const std::string& uid, const std::string& node, int gpu) {
  Allocation a = alloc(uid, node);
  a.gpus = {whole_grant(gpu)};
  return a;
}

}  // namespace

TEST_CASE("take_changes lists each pod whose allocation changed, once", "[model][changes]") {
  Cluster c;
  c.upsert_node(h100_nvswitch("a"));
  c.upsert_node(h100_nvswitch("b"));
  CHECK(c.take_changes().allocations.empty());

  REQUIRE(c.commit(on("u1", "a", 0)));
  REQUIRE(c.restore(on("u2", "b", 0)));
  REQUIRE(c.release("u1"));
  REQUIRE(c.commit(on("u1", "a", 1)));  // released and committed again: listed once
  CHECK(c.take_changes().allocations == std::vector<std::string>{"u1", "u2"});
  CHECK(c.take_changes().allocations.empty());

  CHECK_FALSE(c.commit(on("u3", "a", 1)));  // refused: nothing changed
  CHECK_FALSE(c.release("nobody"));
  c.upsert_node(h100_nvswitch("a"));  // inventory replaced: allocations kept, not changed
  CHECK(c.take_changes().allocations.empty());

  REQUIRE(c.commit(on("u4", "b", 1)));
  c.take_changes();
  REQUIRE(c.remove_node("b"));
  CHECK(c.take_changes().allocations == std::vector<std::string>{"u2", "u4"});
}
