// placement::select_profile on policies parsed from YAML: annotation first, then the first
// matching selector in file order, then the default.
#include <catch2/catch.hpp>

#include <map>
#include <string>
#include <utility>

#include "gapless/model/request.h"
#include "gapless/placement/profile.h"
#include "gapless/policy/loader.h"
#include "test_paths.h"

namespace {

using gapless::model::PodInfo;
using gapless::placement::Policy;
using gapless::placement::Profile;
using gapless::placement::select_profile;

const char* const kPolicy = R"(version: 1
default: base
profiles:
  - name: base
    node: {strategies: {bundle: 1}}
    gpu: {strategies: {bundle: 1}}
  - name: infer
    node: {strategies: {spread: 1}}
    gpu: {strategies: {bundle: 1}}
    select:
      namespaces: [inference, serving]
  - name: infer-research
    node: {strategies: {spread: 1}}
    gpu: {strategies: {spread: 1}}
    select:
      namespaces: [inference]
      podLabels: {team: research}
  - name: train
    node: {strategies: {bundle: 1}}
    gpu: {strategies: {bundle: 1}}
    topology: {weight: 2}
    select:
      priorityClasses: [training-high]
  - name: research-train
    node: {strategies: {bundle: 1}}
    gpu: {strategies: {bundle: 1}}
    select:
      namespaces: [ml]
      priorityClasses: [training-low]
      podLabels: {team: research, tier: batch}
)";

Policy load() {
  auto r = gapless::policy::parse_policy(kPolicy, "select.yaml");
  INFO((r.ok() ? std::string() : r.error()));
  REQUIRE(r.ok());
  return std::move(r).value();
}

PodInfo pod(std::string ns, std::string priority_class = "",
            std::map<std::string, std::string> labels = {}, std::string annotation = "") {
  PodInfo p;
  p.ns = std::move(ns);
  p.name = "p";
  p.priority_class = std::move(priority_class);
  p.labels = std::move(labels);
  p.policy = std::move(annotation);
  return p;
}

std::string picked(const Policy& policy, const PodInfo& p) {
  std::string error;
  const Profile* prof = select_profile(policy, p, &error);
  INFO(error);
  REQUIRE(prof != nullptr);
  CHECK(error.empty());
  return prof->name;
}

}  // namespace

TEST_CASE("select_profile: no selector matches -> default", "[policy][select]") {
  const Policy policy = load();
  CHECK(picked(policy, pod("default")) == "base");
  CHECK(picked(policy, pod("ml", "training-low", {{"team", "research"}})) == "base");
}

TEST_CASE("select_profile: the first matching selector wins", "[policy][select]") {
  const Policy policy = load();
  CHECK(picked(policy, pod("serving")) == "infer");
  // Matches infer and infer-research; infer comes first in the file.
  CHECK(picked(policy, pod("inference", "", {{"team", "research"}})) == "infer");
  // Matches infer (namespace) and train (priority class): file order decides.
  CHECK(picked(policy, pod("inference", "training-high")) == "infer");
  CHECK(picked(policy, pod("batch", "training-high")) == "train");
}

TEST_CASE("select_profile: every criterion of a selector must match", "[policy][select]") {
  const Policy policy = load();
  const std::map<std::string, std::string> labels = {
      {"team", "research"}, {"tier", "batch"}, {"extra", "x"}};
  CHECK(picked(policy, pod("ml", "training-low", labels)) == "research-train");
  CHECK(picked(policy, pod("ml", "training-low", {{"team", "research"}})) == "base");
  CHECK(picked(policy, pod("ml", "other", labels)) == "base");
  CHECK(picked(policy, pod("ml2", "training-low", labels)) == "base");
  CHECK(picked(policy, pod("ml", "training-low", {{"team", "x"}, {"tier", "batch"}})) == "base");
}

TEST_CASE("select_profile: the annotation names a profile explicitly", "[policy][select]") {
  const Policy policy = load();
  // Beats a matching selector...
  CHECK(picked(policy, pod("inference", "", {}, "train")) == "train");
  // ...reaches profiles without selector...
  CHECK(picked(policy, pod("serving", "", {}, "base")) == "base");
  // ...and the default is not needed.
  const Profile* p = select_profile(policy, pod("default", "", {}, "infer-research"), nullptr);
  REQUIRE(p != nullptr);
  CHECK(p->name == "infer-research");
  CHECK(p->topology_weight == 1.0);
}

TEST_CASE("select_profile: an unknown annotation is an error, not a fallback", "[policy][select]") {
  const Policy policy = load();
  std::string error;
  CHECK(select_profile(policy, pod("inference", "", {}, "trian"), &error) == nullptr);
  CHECK_THAT(error, Catch::Contains("trian"));
  // A null error pointer is allowed.
  CHECK(select_profile(policy, pod("inference", "", {}, "trian"), nullptr) == nullptr);
}

TEST_CASE("select_profile on the shipped default policy", "[policy][select]") {
  const auto r =
      gapless::policy::load_policy_file(gapless::test::source_dir() + "/policies/default.yaml");
  REQUIRE(r.ok());
  CHECK(picked(*r, pod("inference")) == "inference");
  CHECK(picked(*r, pod("team-a", "training-high")) == "training");
  CHECK(picked(*r, pod("team-a")) == "default");
  CHECK(picked(*r, pod("inference", "", {}, "training")) == "training");
}
