// Setup the quota tests share (quota_test.cpp, quota_selector_test.cpp): a policy carrying
// quotas, a cluster of hand-built nodes, a pod of a namespace, and GPUs held through the
// Scheduler's reserve stage (so usage is the model's, as in production).
#pragma once

#include <catch2/catch.hpp>

#include <string>
#include <utility>
#include <vector>

#include "gapless/placement/quota.h"
#include "gapless/placement/scheduler.h"
#include "test_nodes.h"

namespace gapless::testquota {

// The built-in policy with `quotas`.
inline placement::Policy with(std::vector<placement::Quota> quotas) {
  placement::Policy p = placement::builtin_policy();
  p.quotas = std::move(quotas);
  return p;
}

inline model::Cluster cluster_of(std::vector<model::Node> nodes) {
  model::Cluster c;
  for (auto& n : nodes) c.upsert_node(std::move(n));
  return c;
}

inline model::PodInfo pod_in(const std::string& ns, const std::string& uid) {
  model::PodInfo p = testnodes::pod(uid);
  p.ns = ns;
  return p;
}

// Reserves the pod on `node` under the default profile; the test fails if it does not fit.
inline void hold(placement::Scheduler& s, const model::PodInfo& p, const model::GpuRequest& req,
                 const std::string& node) {
  const auto loaded = s.policy();
  const auto r = s.reserve(p, req, loaded->policy.profiles[0], node);
  INFO((r ? "" : r.error()));
  REQUIRE(r);
}

}  // namespace gapless::testquota
