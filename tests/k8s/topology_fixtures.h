// The topology fixtures (tests/fixtures/topologies/, written by make_topologies.py) as model
// nodes, and the steps the topology suites share: whole-GPU requests under the default profile,
// pods held on a node, placing and committing, and questions about GPU sets.
// topology_choice_test.cpp compares Gapless with besteffort on them;
// topology_scenarios_test.cpp runs the topology issue's scenarios.
#pragma once

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "gapless/k8s/node_inventory.h"
#include "gapless/model/cluster.h"
#include "gapless/placement/engine.h"
#include "gapless/placement/profile.h"
#include "test_paths.h"

namespace gapless::test::topology {

using model::TopologyWish;

inline const std::vector<std::string> kFixtures = {
    "dgx1-v100", "dgx-a100", "hgx-h100", "nvswitch-16", "a6000-4", "l4-8", "t4-4"};

inline model::Node node_from(const std::string& name, const std::string& annotation) {
  auto r = k8s::node_from_topology_annotation(name, annotation);
  INFO(name << ": " << (r.ok() ? "" : r.error()));
  REQUIRE(r.ok());
  return std::move(r).value();
}

inline model::Node fixture(const std::string& name) {
  return node_from(name, gapless::test::topology_fixture_text(name));
}

// The fixture with its annotation edited as JSON first (health flags, degraded links).
template <typename Edit>
model::Node edited_fixture(const std::string& name, Edit edit) {
  nlohmann::json doc = nlohmann::json::parse(gapless::test::topology_fixture_text(name));
  edit(doc);
  return node_from(name, doc.dump());
}

inline model::GpuRequest whole(int k, TopologyWish wish = TopologyWish::kNvlinkPreferred) {
  model::GpuRequest r;
  r.kind = model::RequestKind::kWhole;
  r.whole = k;
  r.topology = wish;
  return r;
}

inline const placement::Profile& default_profile() {
  static const placement::Policy policy = placement::builtin_policy();
  return policy.profiles.at(0);
}

inline model::PodInfo pod(const std::string& uid) {
  model::PodInfo p;
  p.ns = "default";
  p.name = "pod-" + uid;
  p.uid = uid;
  return p;
}

// Commits a pod holding `gpus` whole.
inline void hold(model::Cluster& c, const std::string& node, const std::string& uid,
                 const std::vector<int>& gpus) {
  model::Allocation a;
  a.pod_uid = uid;
  a.pod_ns = "default";
  a.pod_name = "pod-" + uid;
  a.node = node;
  for (int g : gpus) {
    model::GpuGrant grant;
    grant.index = g;
    a.gpus.push_back(grant);
  }
  const Status s = c.commit(a);
  INFO(s.error());
  REQUIRE(s.ok());
}

inline std::vector<int> indices(const model::Allocation& a) {
  std::vector<int> out;
  for (const auto& g : a.gpus) out.push_back(g.index);
  std::sort(out.begin(), out.end());
  return out;
}

// Places `req` and commits it; empty when refused.
inline std::vector<int> place_commit(model::Cluster& c, const std::string& node,
                                     const std::string& uid, const model::GpuRequest& req) {
  auto a = placement::place(c, req, default_profile(), pod(uid), node);
  if (!a.ok()) return {};
  REQUIRE(c.commit(*a).ok());
  return indices(*a);
}

inline std::vector<int> free_gpus(const model::Node& n) {
  std::vector<int> out;
  for (const auto& g : n.gpus) {
    if (g.healthy && g.used.idle()) out.push_back(g.index);
  }
  return out;
}

inline bool all_nvlink(const model::Node& n, const std::vector<int>& gpus) {
  for (std::size_t i = 0; i < gpus.size(); ++i) {
    for (std::size_t j = i + 1; j < gpus.size(); ++j) {
      if (!n.links.get(gpus[i], gpus[j]).is_nvlink()) return false;
    }
  }
  return true;
}

// Calls f(set) for every k-subset of `from` (ascending).
template <typename F>
void for_each_subset(const std::vector<int>& from, int k, F f) {
  std::vector<int> set;
  auto rec = [&](auto&& self, std::size_t at) -> void {
    if (static_cast<int>(set.size()) == k) return f(set);
    for (std::size_t i = at; i + (k - set.size()) <= from.size(); ++i) {
      set.push_back(from[i]);
      self(self, i + 1);
      set.pop_back();
    }
  };
  rec(rec, 0);
}

// An occupancy state of a node: the pods already on it.
struct State {
  std::string name;
  std::vector<std::vector<int>> pods;  // GPUs held by each pod already on the node
};

inline model::Cluster cluster_in(const model::Node& n, const State& s) {
  model::Cluster c;
  c.upsert_node(n);
  for (std::size_t i = 0; i < s.pods.size(); ++i)
    hold(c, n.name, "held-" + std::to_string(i), s.pods[i]);
  return c;
}

}  // namespace gapless::test::topology
