// The `quotas:` section of policy files: what each key becomes, policies/quotas.yaml, and
// invalid quotas refused with file:line: key path: problem.
#include <catch2/catch.hpp>

#include <string>

#include "../support/policy_text.h"
#include "gapless/placement/quota.h"
#include "gapless/policy/loader.h"
#include "test_paths.h"

namespace {

using gapless::placement::Policy;
using gapless::placement::QuotaResource;
using gapless::policy::load_policy_file;
using gapless::policy::parse_policy;

// Lines 1-6; `quotas:` is line 7 and its first entry starts on line 8.
const std::string kHead = gapless::test::policy_head() + "quotas:\n";

}  // namespace

TEST_CASE("quotas parse into placement::Quota", "[policy][quota]") {
  const auto r = parse_policy(kHead + R"(  - name: team-a
    namespaces: [ml, ml-dev]
    limits: {wholeGpus: 12, gpuMemoryMiB: 40960, gpuComputeMilli: 2500, migComputeSlices: 14,
             wholeGpusPercent: 33.5}
    models:
      NVIDIA-H100-80GB-HBM3: {wholeGpus: 4}
      Tesla-T4: {gpuMemoryMiB: 8192}
  - name: dev
    namespaces: [dev]
    scope: each
    limits: {wholeGpus: 0}
)",
                              "q.yaml");
  INFO((r ? "" : r.error()));
  REQUIRE(r);
  REQUIRE(r->quotas.size() == 2);
  const auto& a = r->quotas[0];
  CHECK(a.name == "team-a");
  CHECK(a.namespaces == std::vector<std::string>{"ml", "ml-dev"});
  CHECK_FALSE(a.each);
  CHECK(a.limits[QuotaResource::kWholeGpus] == 12);
  CHECK(a.limits[QuotaResource::kVramMib] == 40960);
  CHECK(a.limits[QuotaResource::kComputeMilli] == 2500);
  CHECK(a.limits[QuotaResource::kMigSlices] == 14);
  CHECK(a.whole_gpus_percent == 33.5);
  CHECK(a.per_model.at("NVIDIA-H100-80GB-HBM3")[QuotaResource::kWholeGpus] == 4);
  CHECK_FALSE(a.per_model.at("NVIDIA-H100-80GB-HBM3")[QuotaResource::kVramMib]);
  CHECK(a.per_model.at("Tesla-T4")[QuotaResource::kVramMib] == 8192);
  const auto& dev = r->quotas[1];
  CHECK(dev.each);
  CHECK(dev.limits[QuotaResource::kWholeGpus] == 0);  // a limit of 0: no GPUs at all
  CHECK_FALSE(dev.whole_gpus_percent);
}

TEST_CASE("a policy without quotas has none", "[policy][quota]") {
  const auto r = parse_policy(kHead.substr(0, kHead.size() - 8), "q.yaml");
  REQUIRE(r);
  CHECK(r->quotas.empty());
  const auto empty = parse_policy(kHead, "q.yaml");  // `quotas:` with nothing under it
  REQUIRE(empty);
  CHECK(empty->quotas.empty());
}

TEST_CASE("policies/quotas.yaml loads with its documented quotas", "[policy][quota]") {
  const auto r = load_policy_file(gapless::test::source_dir() + "/policies/quotas.yaml");
  INFO((r ? "" : r.error()));
  REQUIRE(r);
  REQUIRE(r->quotas.size() == 2);
  CHECK(r->quotas[0].name == "research");
  CHECK(r->quotas[0].whole_gpus_percent == 33);
  CHECK(r->quotas[0].per_model.size() == 1);
  CHECK(r->quotas[1].each);
}

TEST_CASE("a quota selects namespaces by label, as Kubernetes selectors do", "[policy][quota]") {
  using Op = gapless::model::LabelRequirement::Op;
  const auto r = parse_policy(kHead + R"(  - name: teams
    namespaceSelector:
      matchLabels: {gapless.io/tenant: research, tier: "1"}
      matchExpressions:
        - {key: env, operator: In, values: [prod, staging]}
        - {key: example.com/frozen, operator: DoesNotExist}
    scope: each
    limits: {wholeGpus: 4}
  - name: everyone
    namespaces: [kube-system]
    namespaceSelector: {}
    limits: {wholeGpusPercent: 90}
)",
                              "q.yaml");
  INFO((r ? "" : r.error()));
  REQUIRE(r);
  REQUIRE(r->quotas.size() == 2);
  const auto& teams = r->quotas[0];
  CHECK(teams.namespaces.empty());
  REQUIRE(teams.namespace_selector);
  CHECK(teams.namespace_selector->match_labels ==
        gapless::model::Labels{{"gapless.io/tenant", "research"}, {"tier", "1"}});
  REQUIRE(teams.namespace_selector->match_expressions.size() == 2);
  CHECK(teams.namespace_selector->match_expressions[0] ==
        gapless::model::LabelRequirement{"env", Op::kIn, {"prod", "staging"}});
  CHECK(teams.namespace_selector->match_expressions[1] ==
        gapless::model::LabelRequirement{"example.com/frozen", Op::kDoesNotExist, {}});
  CHECK(teams.each);
  // Both forms: the union. `{}` selects every namespace, as in Kubernetes.
  const auto& everyone = r->quotas[1];
  CHECK(everyone.namespaces == std::vector<std::string>{"kube-system"});
  REQUIRE(everyone.namespace_selector);
  CHECK(everyone.namespace_selector->matches({{"anything", "at-all"}}));
}

TEST_CASE("invalid namespace selectors are refused with file, line and key", "[policy][quota]") {
  struct Case {
    std::string quotas;
    std::string error;
  };
  const std::string q = "  - name: a\n    limits: {wholeGpus: 1}\n    namespaceSelector:\n";
  const Case cases[] = {
      {q + "      matchLabel: {team: a}\n",
       "q.yaml:11: quotas[0].namespaceSelector.matchLabel: unknown key \"matchLabel\""},
      {q + "      matchLabels: {team: \"-a\"}\n",
       "q.yaml:11: quotas[0].namespaceSelector.matchLabels.team: invalid label value \"-a\""},
      {q + "      matchLabels: {\"Bad_Prefix/team\": a}\n",
       "q.yaml:11: quotas[0].namespaceSelector.matchLabels.Bad_Prefix/team: invalid label key"},
      {q + "      matchLabels: {team: [a]}\n",
       "q.yaml:11: quotas[0].namespaceSelector.matchLabels.team: expected a string, got a list"},
      {q + "      matchExpressions:\n        - {key: team, operator: Equals, values: [a]}\n",
       "q.yaml:12: quotas[0].namespaceSelector.matchExpressions[0].operator: unknown operator "
       "\"Equals\" (In, NotIn, Exists, DoesNotExist)"},
      {q + "      matchExpressions:\n        - {key: team, operator: In}\n",
       "q.yaml:12: quotas[0].namespaceSelector.matchExpressions[0].operator: values must name at "
       "least one value when operator is In or NotIn"},
      {q + "      matchExpressions:\n        - {key: team, operator: Exists, values: [a]}\n",
       "q.yaml:12: quotas[0].namespaceSelector.matchExpressions[0].values: values must be empty "
       "when operator is Exists or DoesNotExist"},
      {q + "      matchExpressions:\n        - {operator: Exists}\n",
       "q.yaml:12: quotas[0].namespaceSelector.matchExpressions[0].key: required key is missing"},
      {q + "      matchExpressions: {key: team}\n",
       "q.yaml:11: quotas[0].namespaceSelector.matchExpressions: expected a list of expressions, "
       "got a map"},
      {"  - {name: a, namespaceSelector: [team], limits: {wholeGpus: 1}}\n",
       "q.yaml:8: quotas[0].namespaceSelector: expected a map, got a list"},
  };
  for (const Case& c : cases) {
    INFO(c.quotas);
    gapless::Result<Policy> r = gapless::Error{""};
    REQUIRE_NOTHROW(r = parse_policy(kHead + c.quotas, "q.yaml"));
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.error(), Catch::StartsWith(c.error));
  }
}

TEST_CASE("invalid quotas are refused with file, line and key", "[policy][quota]") {
  struct Case {
    std::string quotas;
    std::string error;
  };
  const Case cases[] = {
      {"  - {name: a, namespaces: [ml], limits: {wholeGPUs: 1}}\n",
       "q.yaml:8: quotas[0].limits.wholeGPUs: unknown key \"wholeGPUs\""},
      {"  - {name: a, namespaces: [ml], limits: {wholeGpus: -1}}\n",
       "q.yaml:8: quotas[0].limits.wholeGpus: must be >= 0, got -1"},
      {"  - {name: a, namespaces: [ml], limits: {wholeGpus: 1.5}}\n",
       "q.yaml:8: quotas[0].limits.wholeGpus: expected a whole number of at most 10^15, got 1.5"},
      {"  - {name: a, namespaces: [ml], limits: {gpuMemoryMiB: lots}}\n",
       "q.yaml:8: quotas[0].limits.gpuMemoryMiB: expected a finite number, got \"lots\""},
      {"  - {name: a, namespaces: [ml], limits: {wholeGpusPercent: 101}}\n",
       "q.yaml:8: quotas[0].limits.wholeGpusPercent: must be <= 100, got 101"},
      {"  - {name: a, namespaces: [ml], limits: {}}\n",
       "q.yaml:8: quotas[0].limits: set at least one limit"},
      {"  - {name: a, namespaces: [ml]}\n", "q.yaml:8: quotas[0]: set limits, models, or both"},
      {"  - {name: a, namespaces: [], limits: {wholeGpus: 1}}\n",
       "q.yaml:8: quotas[0].namespaces: name at least one namespace"},
      {"  - {name: a, limits: {wholeGpus: 1}}\n",
       "q.yaml:8: quotas[0]: set namespaces, namespaceSelector, or both"},
      {"  - {name: Team_A, namespaces: [ml], limits: {wholeGpus: 1}}\n",
       "q.yaml:8: quotas[0].name: invalid quota name \"Team_A\""},
      {"  - {name: a, namespaces: [ml], scope: team, limits: {wholeGpus: 1}}\n",
       "q.yaml:8: quotas[0].scope: unknown scope \"team\""},
      {"  - {name: a, namespaces: [ml], limits: {wholeGpus: 1}}\n"
       "  - {name: a, namespaces: [x], limits: {wholeGpus: 1}}\n",
       "q.yaml:9: quotas[1].name: duplicate quota name \"a\" (also quotas[0])"},
      {"  - name: a\n    namespaces: [ml]\n    models: {H100: {wholeGpus: 1}, h100: {wholeGpus: "
       "2}}\n",
       "q.yaml:10: quotas[0].models.h100: GPU model named twice (case does not matter)"},
      {"  - name: a\n    namespaces: [ml]\n    models: {H100: {wholeGpusPercent: 5}}\n",
       "q.yaml:10: quotas[0].models.H100.wholeGpusPercent: unknown key"},
      {"  - name: a\n    namespaces: [ml]\n    limit: {wholeGpus: 1}\n",
       "q.yaml:10: quotas[0].limit: unknown key \"limit\""},
      {"  name: a\n", "q.yaml:8: quotas: expected a list of quotas, got a map"},
  };
  for (const Case& c : cases) {
    INFO(c.quotas);
    gapless::Result<Policy> r = gapless::Error{""};
    REQUIRE_NOTHROW(r = parse_policy(kHead + c.quotas, "q.yaml"));
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.error(), Catch::StartsWith(c.error));
  }
}
