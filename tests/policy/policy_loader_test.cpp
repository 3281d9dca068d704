// Policy files: parsing, validation messages (file:line: key path: problem), the shipped example
// policies, and profile selection on policies loaded from YAML.
#include <catch2/catch.hpp>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "../support/policy_text.h"
#include "gapless/placement/profile.h"
#include "gapless/policy/loader.h"
#include "test_paths.h"

namespace {

using gapless::placement::Policy;
using gapless::placement::Profile;
using gapless::policy::load_policy_file;
using gapless::policy::parse_policy;

const std::string kSource = gapless::test::source_dir();

std::vector<std::string> names(const std::vector<gapless::placement::WeightedStrategy>& v) {
  std::vector<std::string> out;
  for (const auto& ws : v) out.emplace_back(ws.strategy->name());
  return out;
}

const Profile* by_name(const Policy& p, const std::string& name) {
  for (const Profile& prof : p.profiles) {
    if (prof.name == name) return &prof;
  }
  return nullptr;
}

}  // namespace

TEST_CASE("minimal policy parses with defaults", "[policy]") {
  const auto r = parse_policy(R"(version: 1
default: pack
profiles:
  - name: pack
    node:
      strategies: {bundle: 1}
    gpu:
      strategies: {bundle: 1}
)",
                              "<inline>");
  REQUIRE(r.ok());
  CHECK(r->source == "<inline>");
  CHECK(r->default_profile == "pack");
  REQUIRE(r->profiles.size() == 1);
  const Profile& p = r->profiles[0];
  CHECK(p.name == "pack");
  CHECK(names(p.node) == std::vector<std::string>{"bundle"});
  CHECK(names(p.gpu) == std::vector<std::string>{"bundle"});
  CHECK(p.node[0].weight == 1.0);
  CHECK(p.gpu_weight == 1.0);
  CHECK(p.topology_weight == 1.0);
  CHECK(p.select.empty());
}

TEST_CASE("full policy: weights, strategy order, selectors", "[policy]") {
  const auto r = parse_policy(R"(version: 1
default: mixed
profiles:
  - name: infer-2
    node:
      strategies:
        spread: 3
        bundle: 0.5
    gpu:
      strategies: {spread: 1e-1, bundle: 2}
      weight: 0
    topology:
      weight: 2.5
    select:
      namespaces: [inference, serving]
      priorityClasses:
        - prod
      podLabels: {team: research, "app.kubernetes.io/name": vllm}
  - name: mixed
    node: {strategies: {bundle: 1}}
    gpu: {strategies: {spread: 1}}
    topology: {}
    select:
)",
                              "x.yaml");
  REQUIRE(r.ok());
  REQUIRE(r->profiles.size() == 2);
  CHECK(r->default_profile == "mixed");

  const Profile& a = r->profiles[0];  // file order is kept
  CHECK(a.name == "infer-2");
  // Strategies are sorted by name whatever the file order.
  REQUIRE(names(a.node) == std::vector<std::string>{"bundle", "spread"});
  CHECK(a.node[0].weight == 0.5);
  CHECK(a.node[1].weight == 3.0);
  REQUIRE(names(a.gpu) == std::vector<std::string>{"bundle", "spread"});
  CHECK(a.gpu[0].weight == 2.0);
  CHECK(a.gpu[1].weight == Approx(0.1));
  CHECK(a.gpu_weight == 0.0);
  CHECK(a.topology_weight == 2.5);
  CHECK(a.select.namespaces == std::vector<std::string>{"inference", "serving"});
  CHECK(a.select.priority_classes == std::vector<std::string>{"prod"});
  CHECK(a.select.pod_labels == std::map<std::string, std::string>{
                                   {"app.kubernetes.io/name", "vllm"}, {"team", "research"}});
  for (const auto& ws : a.node) CHECK(ws.strategy != nullptr);

  const Profile& b = r->profiles[1];
  CHECK(b.name == "mixed");
  CHECK(names(b.gpu) == std::vector<std::string>{"spread"});
  CHECK(b.topology_weight == 1.0);  // empty topology map keeps the default
  CHECK(b.select.empty());          // empty select: reached by default or annotation only
}

TEST_CASE("invalid policies are rejected with file:line: key path: problem", "[policy]") {
  // Every case builds on this valid profile body (lines 4-8 of each document).
  struct Case {
    const char* what;
    std::string yaml;
    std::string message;  // exact
  };
  const std::string head = "version: 1\ndefault: a\nprofiles:\n";
  const std::string name_a = "  - name: a\n";
  const std::string node_ok = "    node:\n      strategies: {bundle: 1}\n";
  const std::string gpu_ok = "    gpu:\n      strategies: {bundle: 1}\n";
  const std::string a_ok = name_a + node_ok + gpu_ok;  // lines 4-8

  // Every registered strategy, sorted (placement::strategy_names()).
  const std::string known =
      "(known: bestfit, bundle, clustering, dotprod, fgd, gapless, packing, random, spread)";
  const std::vector<Case> cases = {
      {"unknown strategy", head + name_a + "    node:\n      strategies: {bundel: 1}\n" + gpu_ok,
       "x.yaml:6: profiles[0].node.strategies.bundel: unknown strategy \"bundel\" " + known},
      {"unknown strategy at GPU level, block style",
       head + name_a + node_ok +
           "    gpu:\n      strategies:\n        bundle: 1\n        sprad: 2\n",
       "x.yaml:10: profiles[0].gpu.strategies.sprad: unknown strategy \"sprad\" " + known},
      {"unknown top-level key", "verison: 1\ndefault: a\nprofiles: []\n",
       "x.yaml:1: verison: unknown key \"verison\" (known: version, default, profiles, quotas, "
       "consolidation)"},
      {"unknown profile key", head + a_ok + "    selector: {}\n",
       "x.yaml:9: profiles[0].selector: unknown key \"selector\" "
       "(known: name, node, gpu, topology, filter, drain, select)"},
      {"unknown node-level key",
       head + name_a +
           "    node:\n      strategies: {bundle: 1}\n"
           "      weight: 1\n" +
           gpu_ok,
       "x.yaml:7: profiles[0].node.weight: unknown key \"weight\" (known: strategies)"},
      {"unknown gpu key", head + a_ok + "      wieght: 1\n",
       "x.yaml:9: profiles[0].gpu.wieght: unknown key \"wieght\" (known: strategies, weight)"},
      {"unknown topology key", head + a_ok + "    topology: {weigth: 1}\n",
       "x.yaml:9: profiles[0].topology.weigth: unknown key \"weigth\" (known: weight)"},
      {"unknown select key", head + a_ok + "    select:\n      namespace: [a]\n",
       "x.yaml:10: profiles[0].select.namespace: unknown key \"namespace\" "
       "(known: namespaces, priorityClasses, podLabels)"},
      {"weight not a number", head + a_ok + "      weight: abc\n",
       "x.yaml:9: profiles[0].gpu.weight: expected a finite number, got \"abc\""},
      {"weight with trailing junk", head + a_ok + "      weight: 1x\n",
       "x.yaml:9: profiles[0].gpu.weight: expected a finite number, got \"1x\""},
      {"negative gpu weight", head + a_ok + "      weight: -1\n",
       "x.yaml:9: profiles[0].gpu.weight: must be >= 0, got -1"},
      {"negative topology weight", head + a_ok + "    topology:\n      weight: -0.5\n",
       "x.yaml:10: profiles[0].topology.weight: must be >= 0, got -0.5"},
      {"zero strategy weight",
       head + name_a + "    node:\n      strategies: {bundle: 0}\n" + gpu_ok,
       "x.yaml:6: profiles[0].node.strategies.bundle: must be > 0, got 0"},
      {"negative strategy weight",
       head + name_a + node_ok +
           "    gpu:\n      strategies:\n"
           "        spread: -2\n",
       "x.yaml:9: profiles[0].gpu.strategies.spread: must be > 0, got -2"},
      {"NaN weight (YAML)", head + a_ok + "      weight: .nan\n",
       "x.yaml:9: profiles[0].gpu.weight: expected a finite number, got \".nan\""},
      {"NaN weight (C)", head + a_ok + "      weight: nan\n",
       "x.yaml:9: profiles[0].gpu.weight: expected a finite number, got \"nan\""},
      {"infinite weight", head + a_ok + "      weight: .inf\n",
       "x.yaml:9: profiles[0].gpu.weight: expected a finite number, got \".inf\""},
      {"inf weight (C)", head + a_ok + "    topology: {weight: inf}\n",
       "x.yaml:9: profiles[0].topology.weight: expected a finite number, got \"inf\""},
      {"overflowing weight", head + a_ok + "      weight: 1e999\n",
       "x.yaml:9: profiles[0].gpu.weight: expected a finite number, got \"1e999\""},
      {"empty weight", head + a_ok + "      weight:\n",
       "x.yaml:9: profiles[0].gpu.weight: expected a number, got nothing"},
      {"weight is a map",
       head + name_a + "    node:\n      strategies: {bundle: {weight: 1}}\n" + gpu_ok,
       "x.yaml:6: profiles[0].node.strategies.bundle: expected a number, got a map"},
      {"list where a map is expected",
       head + name_a + "    node:\n      strategies: [bundle]\n" + gpu_ok,
       "x.yaml:6: profiles[0].node.strategies: expected a map, got a list"},
      {"scalar where a map is expected", head + name_a + "    node: bundle\n" + gpu_ok,
       "x.yaml:5: profiles[0].node: expected a map, got \"bundle\""},
      {"empty strategies", head + name_a + "    node:\n      strategies: {}\n" + gpu_ok,
       "x.yaml:6: profiles[0].node.strategies: name at least one strategy " + known},
      {"null strategies", head + name_a + node_ok + "    gpu:\n      strategies:\n",
       "x.yaml:8: profiles[0].gpu.strategies: name at least one strategy " + known},
      {"missing strategies", head + name_a + node_ok + "    gpu: {weight: 1}\n",
       "x.yaml:7: profiles[0].gpu.strategies: required key is missing"},
      {"missing node level", head + name_a + gpu_ok,
       "x.yaml:4: profiles[0].node: required key is missing"},
      {"missing gpu level", head + name_a + node_ok,
       "x.yaml:4: profiles[0].gpu: required key is missing"},
      {"missing name", head + "  - node: {strategies: {bundle: 1}}\n" + gpu_ok,
       "x.yaml:4: profiles[0].name: required key is missing"},
      {"invalid profile name", head + "  - name: Pack_1\n" + node_ok + gpu_ok,
       "x.yaml:4: profiles[0].name: invalid profile name \"Pack_1\" "
       "(use lowercase letters, digits, -)"},
      {"profile name is a list", head + "  - name: [a]\n" + node_ok + gpu_ok,
       "x.yaml:4: profiles[0].name: expected a string, got a list"},
      {"duplicate profile names", head + a_ok + a_ok,
       "x.yaml:9: profiles[1].name: duplicate profile name \"a\" (also profiles[0])"},
      {"duplicate strategy key",
       head + name_a + "    node:\n      strategies: {bundle: 1, bundle: 2}\n" + gpu_ok,
       "x.yaml:6: profiles[0].node.strategies.bundle: duplicate key"},
      {"duplicate top-level key", "version: 1\nversion: 1\ndefault: a\nprofiles: []\n",
       "x.yaml:2: version: duplicate key"},
      {"default names a missing profile", "version: 1\ndefault: b\nprofiles:\n" + a_ok,
       "x.yaml:2: default: no profile named \"b\" (profiles: a)"},
      {"default missing", "version: 1\nprofiles:\n" + a_ok,
       "x.yaml:1: default: required key is missing"},
      {"default is a map", "version: 1\ndefault: {a: 1}\nprofiles:\n" + a_ok,
       "x.yaml:2: default: expected a string, got a map"},
      {"empty profiles list", "version: 1\ndefault: a\nprofiles: []\n",
       "x.yaml:3: profiles: must define at least one profile"},
      {"profiles is a map", "version: 1\ndefault: a\nprofiles:\n  a: {}\n",
       "x.yaml:4: profiles: expected a list of profiles, got a map"},
      {"profiles missing", "version: 1\ndefault: a\n",
       "x.yaml:1: profiles: required key is missing"},
      {"profile entry is a scalar", "version: 1\ndefault: a\nprofiles:\n  - a\n",
       "x.yaml:4: profiles[0]: expected a map, got \"a\""},
      {"unsupported version", "version: 2\ndefault: a\nprofiles:\n" + a_ok,
       "x.yaml:1: version: unsupported version \"2\" (supported: 1)"},
      {"version as a list", "version: [1]\ndefault: a\nprofiles:\n" + a_ok,
       "x.yaml:1: version: expected 1, got a list"},
      {"version missing", "default: a\nprofiles:\n" + a_ok,
       "x.yaml:1: version: required key is missing"},
      {"namespaces is a string", head + a_ok + "    select:\n      namespaces: ml\n",
       "x.yaml:10: profiles[0].select.namespaces: expected a list of strings, got \"ml\""},
      {"namespace entry is a map",
       head + a_ok + "    select:\n      namespaces:\n        - {a: b}\n",
       "x.yaml:11: profiles[0].select.namespaces[0]: expected a string, got a map"},
      {"empty priority class", head + a_ok + "    select:\n      priorityClasses: [\"\"]\n",
       "x.yaml:10: profiles[0].select.priorityClasses[0]: must not be empty"},
      {"podLabels is a list", head + a_ok + "    select:\n      podLabels: [team]\n",
       "x.yaml:10: profiles[0].select.podLabels: expected a map, got a list"},
      {"label value missing", head + a_ok + "    select:\n      podLabels:\n        team:\n",
       "x.yaml:11: profiles[0].select.podLabels.team: expected a string, got nothing"},
      {"root is a list", "- version: 1\n", "x.yaml:1: (root): expected a map, got a list"},
      {"root is a scalar", "hello\n", "x.yaml:1: (root): expected a map, got \"hello\""},
      {"empty document", "",
       "x.yaml:1: (root): empty policy; expected keys version, default, profiles, quotas, "
       "consolidation"},
      {"only comments", "# nothing here\n",
       "x.yaml:1: (root): empty policy; expected keys version, default, profiles, quotas, "
       "consolidation"},
      {"two documents", head + a_ok + "---\nversion: 1\n",
       "x.yaml:10: (root): more than one YAML document; a policy file holds exactly one"},
  };

  for (const Case& c : cases) {
    INFO(c.what << "\n--- yaml ---\n" << c.yaml);
    const auto r = parse_policy(c.yaml, "x.yaml");
    REQUIRE_FALSE(r.ok());
    CHECK(r.error() == c.message);
  }
}

TEST_CASE("the valid profile body used by the error table is itself valid", "[policy]") {
  const auto r = parse_policy(
      "version: 1\ndefault: a\nprofiles:\n  - name: a\n    node:\n      strategies: {bundle: "
      "1}\n    gpu:\n      strategies: {bundle: 1}\n",
      "x.yaml");
  INFO((r.ok() ? std::string() : r.error()));
  CHECK(r.ok());
}

TEST_CASE("malformed YAML is an error with file and line, never an exception", "[policy]") {
  struct Case {
    std::string yaml;
    std::string prefix;
  };
  const std::vector<Case> cases = {
      {"version: 1\ndefault: a\nprofiles: [a,\n", "bad.yaml:3: invalid YAML: "},
      {"version: 1\ndefault: a: b\n", "bad.yaml:2: invalid YAML: "},
      {"version: 1\nprofiles:\n  - name: a\n    node: {strategies: {bundle: 1}\n",
       "bad.yaml:4: invalid YAML: "},
      {"version: 1\n  default: a\n", "bad.yaml:2: invalid YAML: "},
      {"version: 1\n\tdefault: a\n", "bad.yaml:2: invalid YAML: "},
      {"version: 1\ndefault: [a}\n", "bad.yaml:2: invalid YAML: "},
      {"version: 1\n- a\n", "bad.yaml:2: invalid YAML: "},
      {"version: 1\nprofiles:\n  - a\n  b: 1\n", "bad.yaml:4: invalid YAML: "},
      {"version: 1\ndefault: *nope\n", "bad.yaml:2: invalid YAML: "},
  };
  for (const Case& c : cases) {
    INFO(c.yaml);
    gapless::Result<Policy> r = gapless::Error{""};
    REQUIRE_NOTHROW(r = parse_policy(c.yaml, "bad.yaml"));
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.error(), Catch::StartsWith(c.prefix));
    CHECK(r.error().size() > c.prefix.size());  // yaml-cpp's reason follows
  }
}

TEST_CASE("pathologically nested YAML is an error, not a crash", "[policy]") {
  const std::string deep = "version: 1\ndefault: " + std::string(100000, '[') + "\n";
  gapless::Result<Policy> r = gapless::Error{""};
  REQUIRE_NOTHROW(r = parse_policy(deep, "deep.yaml"));
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.error(), Catch::StartsWith("deep.yaml:2: invalid YAML: "));
}

// yaml-cpp 0.7's LoadAll read a document starting with ',' as empty without consuming the ',',
// and appended empty documents until memory ran out (found by fuzz/policy_fuzz.cpp).
TEST_CASE("a document starting with a stray comma is an error, not an endless loop", "[policy]") {
  const std::pair<std::string, std::string> cases[] = {
      {",", "bad.yaml:1: invalid YAML: "},
      {"version: 1\n---\n,\n", "bad.yaml:3: invalid YAML: "},
      {"version: 1\ndefault: a\n---\n, x\n", "bad.yaml:4: invalid YAML: "},
  };
  for (const auto& [yaml, prefix] : cases) {
    INFO(yaml);
    gapless::Result<Policy> r = gapless::Error{""};
    REQUIRE_NOTHROW(r = parse_policy(yaml, "bad.yaml"));
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.error(), Catch::StartsWith(prefix));
  }
}

TEST_CASE("shipped policy files load", "[policy]") {
  for (const char* file : {"default.yaml", "bundle.yaml", "spread.yaml"}) {
    const std::string path = kSource + "/policies/" + file;
    INFO(path);
    const auto r = load_policy_file(path);
    INFO((r.ok() ? std::string() : r.error()));
    REQUIRE(r.ok());
    CHECK(r->source == path);
    CHECK(by_name(*r, r->default_profile) != nullptr);
    for (const Profile& p : r->profiles) {
      CHECK_FALSE(p.node.empty());
      CHECK_FALSE(p.gpu.empty());
    }
  }
}

TEST_CASE("policies/default.yaml has the documented profiles", "[policy]") {
  const auto r = load_policy_file(kSource + "/policies/default.yaml");
  REQUIRE(r.ok());
  CHECK(r->default_profile == "default");

  const Profile* d = by_name(*r, "default");
  REQUIRE(d != nullptr);
  CHECK(names(d->node) == std::vector<std::string>{"gapless"});
  CHECK(names(d->gpu) == std::vector<std::string>{"gapless"});
  CHECK(d->gpu_weight == 0.0);
  CHECK(d->topology_weight == 1.0);
  CHECK(d->select.empty());

  const Profile* inf = by_name(*r, "inference");
  REQUIRE(inf != nullptr);
  CHECK(names(inf->node) == std::vector<std::string>{"spread"});
  CHECK(names(inf->gpu) == std::vector<std::string>{"bundle"});
  CHECK(inf->select.namespaces == std::vector<std::string>{"inference"});

  const Profile* tr = by_name(*r, "training");
  REQUIRE(tr != nullptr);
  CHECK(names(tr->node) == std::vector<std::string>{"gapless"});
  CHECK(tr->topology_weight == 2.0);
  CHECK_FALSE(tr->select.priority_classes.empty());
}

TEST_CASE("bundle.yaml and spread.yaml use one strategy at both levels", "[policy]") {
  for (const std::string s : {"bundle", "spread"}) {
    const auto r = load_policy_file(kSource + "/policies/" + s + ".yaml");
    REQUIRE(r.ok());
    REQUIRE(r->profiles.size() == 1);
    CHECK(r->default_profile == s);
    CHECK(names(r->profiles[0].node) == std::vector<std::string>{s});
    CHECK(names(r->profiles[0].gpu) == std::vector<std::string>{s});
  }
}

TEST_CASE("unreadable policy files are errors naming the path", "[policy]") {
  const std::string missing = kSource + "/policies/does-not-exist.yaml";
  const auto r = load_policy_file(missing);
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.error(), Catch::StartsWith(missing + ": cannot read policy file: "));

  const auto dir = load_policy_file(kSource + "/policies");
  REQUIRE_FALSE(dir.ok());
  CHECK_THAT(dir.error(), Catch::StartsWith(kSource + "/policies: cannot read policy file"));
}

TEST_CASE("filter.keepBest is a whole number of nodes and 0 or absent keeps all", "[policy]") {
  const std::string head = gapless::test::policy_head("p", "gapless");
  const auto none = parse_policy(head, "<inline>");
  REQUIRE(none.ok());
  CHECK(none->profiles[0].keep_best == 0);
  const auto eight = parse_policy(head + "    filter: {keepBest: 8}\n", "<inline>");
  REQUIRE(eight.ok());
  CHECK(eight->profiles[0].keep_best == 8);
  const auto half = parse_policy(head + "    filter: {keepBest: 2.5}\n", "x.yaml");
  REQUIRE(!half.ok());
  CHECK(half.error().find("x.yaml:7: profiles[0].filter.keepBest: must be a whole number") !=
        std::string::npos);
  const auto negative = parse_policy(head + "    filter: {keepBest: -1}\n", "x.yaml");
  REQUIRE(!negative.ok());
  CHECK(negative.error().find("must be >= 0") != std::string::npos);
  const auto typo = parse_policy(head + "    filter: {keepbest: 8}\n", "x.yaml");
  REQUIRE(!typo.ok());
  CHECK(typo.error().find("keepbest") != std::string::npos);
}

TEST_CASE("drain.minGpus is a whole number of GPUs and 0 or absent never drains", "[policy]") {
  const std::string head = gapless::test::policy_head("p", "gapless");
  const auto none = parse_policy(head, "<inline>");
  REQUIRE(none.ok());
  CHECK(none->profiles[0].drain_min_gpus == 0);
  const auto two = parse_policy(head + "    drain: {minGpus: 2}\n", "<inline>");
  REQUIRE(two.ok());
  CHECK(two->profiles[0].drain_min_gpus == 2);
  const auto half = parse_policy(head + "    drain: {minGpus: 1.5}\n", "x.yaml");
  REQUIRE(!half.ok());
  CHECK(half.error().find("x.yaml:7: profiles[0].drain.minGpus: must be a whole number") !=
        std::string::npos);
  const auto negative = parse_policy(head + "    drain: {minGpus: -2}\n", "x.yaml");
  REQUIRE(!negative.ok());
  CHECK(negative.error().find("must be >= 0") != std::string::npos);
  const auto typo = parse_policy(head + "    drain: {mingpus: 2}\n", "x.yaml");
  REQUIRE(!typo.ok());
  CHECK(typo.error().find("mingpus") != std::string::npos);
  // The shipped default and the built-in policy drain for pods of 2 GPUs or more.
  const auto shipped = load_policy_file(kSource + "/policies/default.yaml");
  REQUIRE(shipped.ok());
  CHECK(shipped->profiles[0].drain_min_gpus == 2);
  CHECK(gapless::placement::builtin_policy().profiles[0].drain_min_gpus == 2);
}
