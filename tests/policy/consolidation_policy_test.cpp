// The `consolidation:` section of policy files: what each key becomes, the defaults (off), and
// bad values refused with file:line: key path: problem.
#include <catch2/catch.hpp>

#include <string>

#include "../support/policy_text.h"
#include "gapless/policy/loader.h"
#include "test_paths.h"

namespace {

using gapless::policy::load_policy_file;
using gapless::policy::parse_policy;

const std::string kSource = gapless::test::source_dir();

// Lines 1-6; `consolidation:` is line 7 and its first key is on line 8.
const std::string kHead = gapless::test::policy_head() + "consolidation:\n";

}  // namespace

TEST_CASE("consolidation parses into placement::ConsolidationRules", "[policy][consolidation]") {
  const auto r = parse_policy(kHead + R"(  enabled: true
  dryRun: true
  movablePriorityBelow: 1000
  maxMovesPerPlan: 2
  holdSeconds: 45
  rateLimit: {perMinute: 6, perNamespacePerMinute: 2, podCooldownSeconds: 900}
)",
                              "c.yaml");
  INFO((r ? "" : r.error()));
  REQUIRE(r);
  const auto& c = r->consolidation;
  CHECK(c.enabled);
  CHECK(c.dry_run);
  REQUIRE(c.movable_below_priority);
  CHECK(*c.movable_below_priority == 1000);
  CHECK(c.max_moves == 2);
  CHECK(c.per_minute == 6);
  CHECK(c.per_namespace_per_minute == 2);
  CHECK(c.pod_cooldown_s == 900);
  CHECK(c.hold_s == 45);
}

TEST_CASE("consolidation is off unless a policy turns it on", "[policy][consolidation]") {
  const auto r = parse_policy(gapless::test::policy_head(), "p.yaml");
  REQUIRE(r);
  CHECK_FALSE(r->consolidation.enabled);
  CHECK_FALSE(r->consolidation.movable_below_priority);
  const auto empty = parse_policy(kHead, "p.yaml");
  REQUIRE(empty);
  CHECK_FALSE(empty->consolidation.enabled);
  const auto shipped = load_policy_file(kSource + "/policies/default.yaml");
  REQUIRE(shipped);
  CHECK_FALSE(shipped->consolidation.enabled);
  CHECK(shipped->consolidation.max_moves == 3);
  CHECK(shipped->consolidation.hold_s == 60);
}

TEST_CASE("bad consolidation values are refused with where and why", "[policy][consolidation]") {
  const std::pair<const char*, const char*> cases[] = {
      {"  enabled: yes-please\n", "c.yaml:8: consolidation.enabled: expected true or false"},
      {"  dryRun: [true]\n", "c.yaml:8: consolidation.dryRun: expected true or false"},
      {"  maxMovesPerPlan: 0\n", "c.yaml:8: consolidation.maxMovesPerPlan: expected evictions"},
      {"  maxMovesPerPlan: 2.5\n", "c.yaml:8: consolidation.maxMovesPerPlan: expected evictions"},
      {"  maxMovesPerPlan: 9\n", "c.yaml:8: consolidation.maxMovesPerPlan: expected evictions"},
      {"  movablePriorityBelow: 3000000000\n",
       "c.yaml:8: consolidation.movablePriorityBelow: expected a pod priority"},
      {"  movablePriorityBelow: high\n",
       "c.yaml:8: consolidation.movablePriorityBelow: expected a pod priority"},
      {"  rateLimit: {perMinute: -1}\n",
       "c.yaml:8: consolidation.rateLimit.perMinute: expected evictions per minute"},
      {"  rateLimit: {podCooldownSeconds: .nan}\n",
       "c.yaml:8: consolidation.rateLimit.podCooldownSeconds: expected seconds"},
      {"  holdSeconds: 3601\n", "c.yaml:8: consolidation.holdSeconds: expected seconds"},
      {"  holdSeconds: -1\n", "c.yaml:8: consolidation.holdSeconds: expected seconds"},
      {"  rateLimit: {perHour: 3}\n", "c.yaml:8: consolidation.rateLimit.perHour: unknown key"},
      {"  maxMoves: 3\n", "c.yaml:8: consolidation.maxMoves: unknown key"},
  };
  for (const auto& [text, expected] : cases) {
    const auto r = parse_policy(kHead + text, "c.yaml");
    INFO(text);
    REQUIRE_FALSE(r);
    CHECK_THAT(r.error(), Catch::StartsWith(expected));
  }
  const auto not_a_map =
      parse_policy(gapless::test::policy_head() + "consolidation: on\n", "c.yaml");
  REQUIRE_FALSE(not_a_map);
  CHECK_THAT(not_a_map.error(), Catch::StartsWith("c.yaml:7: consolidation:"));
}
