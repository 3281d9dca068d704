#include "gapless/model/name_index.h"

#include <catch2/catch.hpp>
#include <list>
#include <map>
#include <random>
#include <string>

#include "gapless/model/cluster.h"

using gapless::model::Cluster;
using gapless::model::NameIndex;
using gapless::model::Node;

TEST_CASE("name index: finds exactly the nodes present through random inserts and erases",
          "[model][name_index]") {
  std::list<Node> storage;  // stable addresses, as the Cluster's map gives
  std::map<std::string, const Node*> truth;
  NameIndex index;
  std::mt19937 rng(7);
  for (int step = 0; step < 20000; ++step) {
    const std::string name = "node-" + std::to_string(rng() % 700);
    if (rng() % 3 != 0) {
      if (truth.count(name) != 0) continue;
      Node& n = storage.emplace_back();
      n.name = name;
      index.insert(&n);
      truth[name] = &n;
    } else {
      index.erase(name);
      truth.erase(name);
    }
    if (step % 500 == 0) {
      for (int k = 0; k < 700; ++k) {
        const std::string probe = "node-" + std::to_string(k);
        auto it = truth.find(probe);
        REQUIRE(index.find(probe) == (it == truth.end() ? nullptr : it->second));
      }
    }
  }
  CHECK(index.find("absent") == nullptr);
  index.clear();
  CHECK(index.find(truth.begin()->first) == nullptr);
}

TEST_CASE("cluster: a copy finds its own nodes, and removal forgets the name",
          "[model][name_index]") {
  Cluster a;
  for (const char* name : {"n1", "n2", "n3"}) {
    Node n;
    n.name = name;
    a.upsert_node(n);
  }
  Cluster b = a;
  REQUIRE(b.find_node("n2") != nullptr);
  CHECK(b.find_node("n2") != a.find_node("n2"));
  Cluster c;
  c = b;
  CHECK(c.find_node("n3") != b.find_node("n3"));
  CHECK(c.find_node("n3")->name == "n3");
  Cluster moved = std::move(c);
  CHECK(moved.find_node("n1")->name == "n1");
  REQUIRE(a.remove_node("n2"));
  CHECK(a.find_node("n2") == nullptr);
  CHECK(b.find_node("n2") != nullptr);
  Node again;
  again.name = "n2";
  a.upsert_node(again);
  CHECK(a.find_node("n2")->name == "n2");
}
