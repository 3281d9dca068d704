// What the bench tests replay: a paper baseline by name, the shipped default policy and
// scheduler configuration, and where the fixtures are.
#pragma once

#include <catch2/catch.hpp>
#include <string>

#include "deployed.h"
#include "gapless/placement/strategy.h"
#include "gapless/policy/loader.h"
#include "sweep.h"
#include "test_paths.h"

namespace gapless::bench::testing {

inline const std::string kSource = gapless::test::source_dir();
inline const std::string kFixtures = kSource + "/tests/fixtures/bench/";

// The strategy alone at both levels, without Gapless's GPU and topology terms (the paper's form).
inline PolicySetup paper(const char* name) {
  PolicySetup p;
  p.label = name;
  p.profile.node = {{placement::find_strategy(name), 1.0}};
  p.profile.gpu = {{placement::find_strategy(name), 1.0}};
  p.profile.gpu_weight = 0;
  p.profile.topology_weight = 0;
  return p;
}

// policies/default.yaml's profile for a pod that names none.
inline PolicySetup shipped_policy() {
  auto policy = policy::load_policy_file(gapless::test::source_dir() + "/policies/default.yaml");
  REQUIRE(policy.ok());
  PolicySetup setup;
  setup.label = "policies/default.yaml";
  std::string err;
  setup.profile = *placement::select_profile(*policy, model::PodInfo{}, &err);
  return setup;
}

// manifests/scheduler-config.yaml, as the as-deployed replays read it.
inline SchedulerConfig shipped_config() {
  auto c = load_scheduler_config(kSource + "/manifests/scheduler-config.yaml");
  REQUIRE(c.ok());
  return *c;
}

}  // namespace gapless::bench::testing
