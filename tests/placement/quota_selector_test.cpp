// Quotas that select namespaces by label: the tenant is every namespace whose labels match now
// (scope shared: one budget for their union; each: the limits for every one alone), so a
// relabelled namespace moves between quotas at once while usage stays the model's.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "quota_fixture.h"

namespace {

using namespace gapless;
using namespace gapless::testnodes;
using namespace gapless::testquota;
using placement::Quota;
using placement::QuotaResource;
using placement::Scheduler;
using Op = model::LabelRequirement::Op;

Quota team_quota(const std::string& team, std::int64_t whole_gpus, bool each = false) {
  Quota q;
  q.name = "team-" + team;
  q.namespace_selector = model::LabelSelector{{{"team", team}}, {}};
  q.each = each;
  q.limits[QuotaResource::kWholeGpus] = whole_gpus;
  return q;
}

// filter's unresolvable reason on n1 for a pod of `ns` asking `gpus` whole GPUs; "" if it passes.
std::string refusal(const Scheduler& s, const std::string& ns, int gpus) {
  const auto r = s.filter(*s.policy(), pod_in(ns, "new"), whole(gpus), {"n1"});
  if (r.passed.size() == 1) return "";
  const auto u = r.unresolvable();
  return u.count("n1") ? u.at("n1") : "refused, not as unresolvable";
}

}  // namespace

TEST_CASE("a selector quota limits the union of the namespaces it matches", "[quota][selector]") {
  Scheduler s(cluster_of({h100_nvswitch("n1")}), with({team_quota("a", 4)}));
  s.set_namespaces({{"a1", {{"team", "a"}}}, {"a2", {{"team", "a"}}}, {"b1", {{"team", "b"}}}});
  hold(s, pod_in("a1", "p1"), whole(2), "n1");
  hold(s, pod_in("a2", "p2"), whole(2), "n1");
  hold(s, pod_in("b1", "p3"), whole(2), "n1");
  CHECK(refusal(s, "a1", 1) ==
        "gapless: namespace a1 over quota \"team-a\": 4 of 4 whole GPUs in use, pod asks 1");
  CHECK(refusal(s, "a2", 1) ==
        "gapless: namespace a2 over quota \"team-a\": 4 of 4 whole GPUs in use, pod asks 1");
  CHECK(refusal(s, "b1", 2).empty());  // not selected
  CHECK(refusal(s, "c", 2).empty());   // not known: only its name label, not selected

  // a2 moves to team b: its 2 GPUs leave team a's budget (the model is unchanged).
  s.set_namespace("a2", {{"team", "b"}});
  CHECK(refusal(s, "a1", 2).empty());
  CHECK(refusal(s, "a1", 3) ==
        "gapless: namespace a1 over quota \"team-a\": 2 of 4 whole GPUs in use, pod asks 3");
  CHECK(refusal(s, "a2", 2).empty());
  // ... and back, then deleted: a namespace no longer known is selected no more.
  s.set_namespace("a2", {{"team", "a"}});
  CHECK_FALSE(refusal(s, "a1", 1).empty());
  s.erase_namespace("a2");
  CHECK(refusal(s, "a1", 2).empty());
  // A full list replaces what was known.
  s.set_namespaces({{"a1", {}}, {"a2", {{"team", "a"}}}});
  CHECK(refusal(s, "a1", 2).empty());
  CHECK(refusal(s, "a2", 3) ==
        "gapless: namespace a2 over quota \"team-a\": 2 of 4 whole GPUs in use, pod asks 3");
}

TEST_CASE("a selector quota of scope each limits every matched namespace alone",
          "[quota][selector]") {
  Scheduler s(cluster_of({h100_nvswitch("n1")}), with({team_quota("a", 2, true)}));
  s.set_namespaces({{"a1", {{"team", "a"}}}, {"a2", {{"team", "a"}}}});
  hold(s, pod_in("a1", "p1"), whole(2), "n1");
  CHECK(refusal(s, "a1", 1) ==
        "gapless: namespace a1 over quota \"team-a\": 2 of 2 whole GPUs in use, pod asks 1");
  CHECK(refusal(s, "a2", 2).empty());
  CHECK(refusal(s, "a2", 3) ==
        "gapless: namespace a2 over quota \"team-a\": 0 of 2 whole GPUs in use, pod asks 3");
  s.set_namespace("a1", {{"team", "x"}});
  CHECK(refusal(s, "a1", 4).empty());
}

TEST_CASE("selectors with expressions; unknown namespaces carry their name label",
          "[quota][selector]") {
  Quota q;
  q.name = "not-system";
  q.namespace_selector = model::LabelSelector{
      {}, {{"kubernetes.io/metadata.name", Op::kNotIn, {"kube-system"}}, {"gpu", Op::kExists, {}}}};
  q.limits[QuotaResource::kWholeGpus] = 1;
  Quota named;  // listed and selected: the union
  named.name = "named";
  named.namespaces = {"listed"};
  named.namespace_selector =
      model::LabelSelector{{}, {{"kubernetes.io/metadata.name", Op::kIn, {"never-seen"}}}};
  named.limits[QuotaResource::kWholeGpus] = 3;
  Scheduler s(cluster_of({h100_nvswitch("n1")}), with({q, named}));
  s.set_namespaces(
      {{"ml", {{"gpu", "yes"}, {"kubernetes.io/metadata.name", "ml"}}},
       {"kube-system", {{"gpu", "yes"}, {"kubernetes.io/metadata.name", "kube-system"}}},
       {"web", {{"kubernetes.io/metadata.name", "web"}}}});
  CHECK_FALSE(refusal(s, "ml", 2).empty());
  CHECK(refusal(s, "kube-system", 2).empty());
  CHECK(refusal(s, "web", 2).empty());
  CHECK_FALSE(refusal(s, "never-seen", 4).empty());
  CHECK(refusal(s, "never-seen", 3).empty());
  CHECK_FALSE(refusal(s, "listed", 4).empty());
}

TEST_CASE("quota rows list the namespaces a selector matches now", "[quota][selector]") {
  Scheduler s(cluster_of({h100_nvswitch("n1")}), with({team_quota("a", 4)}));
  s.set_namespaces({{"a1", {{"team", "a"}}}, {"a2", {{"team", "a"}}}, {"b1", {{"team", "b"}}}});
  hold(s, pod_in("a1", "p1"), whole(3), "n1");
  auto rows = s.quota_rows();
  REQUIRE(rows.size() == 2);
  CHECK(rows[0].ns == "a1");
  CHECK(rows[0].used == 3);
  CHECK(rows[0].limit == 4);
  CHECK(rows[1].ns == "a2");
  CHECK(rows[1].used == 0);
  s.set_namespace("a1", {});
  rows = s.quota_rows();
  REQUIRE(rows.size() == 1);
  CHECK(rows[0].ns == "a2");
}
