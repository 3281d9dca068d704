// Namespace quotas through the Scheduler's stages: each form (whole GPUs, shared vRAM, shared
// compute, MIG compute slices, per GPU model, percent of the cluster), shared and per-namespace
// budgets, the reason text, reserve refusing a pod that raced past filter, usage following the
// model (not a counter), and a policy reload keeping usage.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "quota_fixture.h"

namespace {

using namespace gapless;
using namespace gapless::testnodes;
using namespace gapless::testquota;
using placement::FilterResult;
using placement::Quota;
using placement::QuotaResource;
using placement::Scheduler;

Quota quota(const std::string& name, std::vector<std::string> namespaces) {
  Quota q;
  q.name = name;
  q.namespaces = std::move(namespaces);
  return q;
}

FilterResult filter(const Scheduler& s, const model::PodInfo& p, const model::GpuRequest& req,
                    const std::vector<std::string>& nodes) {
  return s.filter(*s.policy(), p, req, nodes);
}

std::size_t allocations(const Scheduler& s) {
  std::size_t n = 0;
  s.read([&](const model::Cluster& c) { n = c.allocation_count(); });
  return n;
}

}  // namespace

TEST_CASE("quota on whole GPUs: unresolvable everywhere, reason names it", "[quota]") {
  Quota q = quota("team-a", {"ml"});
  q.limits[QuotaResource::kWholeGpus] = 4;
  Scheduler s(cluster_of({h100_nvswitch("n1"), h100_nvswitch("n2")}), with({q}));
  hold(s, pod_in("ml", "a"), whole(2), "n1");
  hold(s, pod_in("ml", "b"), whole(2), "n2");

  const FilterResult r = filter(s, pod_in("ml", "c"), whole(2), {"n1", "n2", "n1"});
  CHECK(r.passed.empty());
  CHECK(r.failed().empty());
  const auto unresolvable = r.unresolvable();
  REQUIRE(unresolvable.size() == 2);
  CHECK(unresolvable.at("n1") ==
        "gapless: namespace ml over quota \"team-a\": 4 of 4 whole GPUs in use, pod asks 2");
  CHECK(r.labels().at("n2") == "over_quota");

  // Other namespaces, and pods of ml that ask for no GPU, are not limited.
  CHECK(filter(s, pod_in("web", "d"), whole(2), {"n1", "n2"}).passed.size() == 2);
  CHECK(filter(s, pod_in("ml", "e"), model::GpuRequest{}, {"n1"}).passed.size() == 1);

  // Unresolvable until usage drops: a pod leaving lets the next one in.
  REQUIRE(s.release("a"));
  CHECK(filter(s, pod_in("ml", "c"), whole(2), {"n1", "n2"}).passed.size() == 2);
}

TEST_CASE("quota on shared vRAM and compute counts every GPU of a share", "[quota]") {
  Quota q = quota("shares", {"ml"});
  q.limits[QuotaResource::kVramMib] = 30000;
  q.limits[QuotaResource::kComputeMilli] = 1200;
  Scheduler s(cluster_of({h100_nvswitch("n1")}), with({q}));
  hold(s, pod_in("ml", "a"), shared(10000, 300, 2), "n1");  // 20000 MiB, 600 milli

  CHECK(filter(s, pod_in("ml", "b"), shared(10000, 0), {"n1"}).passed.size() == 1);
  CHECK(filter(s, pod_in("ml", "b"), shared(5001, 0, 2), {"n1"}).unresolvable().at("n1") ==
        "gapless: namespace ml over quota \"shares\": 20000 of 30000 MiB of shared vRAM in use, "
        "pod asks 10002");
  CHECK(filter(s, pod_in("ml", "b"), shared(0, 700), {"n1"}).unresolvable().at("n1") ==
        "gapless: namespace ml over quota \"shares\": 600 of 1200 milli-GPU of shared compute in "
        "use, pod asks 700");
  // A whole GPU is not a share: only a whole-GPU limit would count it.
  CHECK(filter(s, pod_in("ml", "b"), whole(8), {"n1"}).failed().size() == 1);
}

TEST_CASE("quota on MIG counts compute slices, whatever the memory", "[quota]") {
  Quota q = quota("mig", {"ml"});
  q.limits[QuotaResource::kMigSlices] = 7;
  Scheduler s(cluster_of({a100_80_mig("a")}), with({q}));
  hold(s, pod_in("ml", "p1"), mig("3g.40gb"), "a");
  hold(s, pod_in("ml", "p2"), mig("3g.40gb"), "a");
  CHECK(filter(s, pod_in("ml", "p3"), mig("2g.20gb"), {"a"}).unresolvable().at("a") ==
        "gapless: namespace ml over quota \"mig\": 6 of 7 MIG compute slices in use, pod asks 2");
  hold(s, pod_in("ml", "p3"), mig("1g.10gb+me"), "a");
  CHECK(filter(s, pod_in("ml", "p4"), mig("1g.10gb"), {"a"}).unresolvable().size() == 1);
}

TEST_CASE("per-model quota refuses only nodes of that model", "[quota]") {
  Quota q = quota("h100s", {"ml"});
  q.per_model["nvidia-h100-80gb-hbm3"][QuotaResource::kWholeGpus] = 2;
  Scheduler s(cluster_of({h100_nvswitch("h"), t4_node("t")}), with({q}));
  hold(s, pod_in("ml", "a"), whole(2), "h");

  const FilterResult r = filter(s, pod_in("ml", "b"), whole(1), {"h", "t"});
  CHECK(r.passed == std::vector<std::string>{"t"});
  CHECK(r.unresolvable().at("h") ==
        "gapless: namespace ml over quota \"h100s\": 2 of 2 whole GPUs of model "
        "nvidia-h100-80gb-hbm3 in use, pod asks 1");
  // Reserve refuses the H100 too (a bind naming it after filter said no).
  const auto loaded = s.policy();
  CHECK_FALSE(s.reserve(pod_in("ml", "b"), whole(1), loaded->policy.profiles[0], "h"));
  hold(s, pod_in("ml", "b"), whole(1), "t");
}

TEST_CASE("on a node of two models, reserve picks the model still under its limit", "[quota]") {
  model::Node mixed = pcie_node("mixed", 8, kH100, 81559);
  for (int i = 4; i < 8; ++i) mixed.gpus[i] = make_gpu(i, kT4, 15360);
  normalize(mixed);
  Quota q = quota("h100s", {"ml"});
  q.per_model[kH100][QuotaResource::kWholeGpus] = 1;
  Scheduler s(cluster_of({mixed}), with({q}));
  model::GpuRequest h100 = whole(1);
  h100.models = {kH100};
  hold(s, pod_in("ml", "a"), h100, "mixed");

  REQUIRE(filter(s, pod_in("ml", "b"), whole(2), {"mixed"}).passed.size() == 1);
  hold(s, pod_in("ml", "b"), whole(2), "mixed");
  s.read([](const model::Cluster& c) {
    for (const model::GpuGrant& g : c.allocation("b")->gpus) CHECK(g.index >= 4);  // T4s
  });
  CHECK(filter(s, pod_in("ml", "c"), h100, {"mixed"}).unresolvable().size() == 1);
  const auto loaded = s.policy();
  const auto r = s.reserve(pod_in("ml", "c"), h100, loaded->policy.profiles[0], "mixed");
  REQUIRE_FALSE(r);
  CHECK(r.error() == "gapless: namespace ml over quota \"h100s\": 1 of 1 whole GPUs of model " +
                         std::string(kH100) + " in use, pod asks 1");
}

TEST_CASE("percent-of-cluster quota follows the cluster's GPU count", "[quota]") {
  Quota q = quota("third", {"ml"});
  q.whole_gpus_percent = 25;
  Scheduler s(cluster_of({h100_nvswitch("n1"), h100_nvswitch("n2")}), with({q}));
  hold(s, pod_in("ml", "a"), whole(4), "n1");
  CHECK(filter(s, pod_in("ml", "b"), whole(1), {"n1", "n2"}).unresolvable().at("n2") ==
        "gapless: namespace ml over quota \"third\": 4 of 4 whole GPUs (25% of the cluster's 16 "
        "GPUs) in use, pod asks 1");
  // A third node: 25% of 24 GPUs is 6.
  s.mutate([](model::Cluster& c) { c.upsert_node(h100_nvswitch("n3")); });
  CHECK(filter(s, pod_in("ml", "b"), whole(2), {"n2"}).passed.size() == 1);
  CHECK(filter(s, pod_in("ml", "b"), whole(3), {"n2"}).unresolvable().size() == 1);
  s.mutate([](model::Cluster& c) { c.remove_node("n3"); });
  CHECK(filter(s, pod_in("ml", "b"), whole(1), {"n2"}).unresolvable().size() == 1);
}

TEST_CASE("a shared quota sums its namespaces; scope each limits them one by one", "[quota]") {
  Quota shared_q = quota("tenant", {"a", "b"});
  shared_q.limits[QuotaResource::kWholeGpus] = 4;
  Quota each_q = quota("per-ns", {"c", "d"});
  each_q.each = true;
  each_q.limits[QuotaResource::kWholeGpus] = 2;
  Scheduler s(cluster_of({h100_nvswitch("n1")}), with({shared_q, each_q}));
  hold(s, pod_in("a", "1"), whole(2), "n1");
  hold(s, pod_in("b", "2"), whole(2), "n1");
  hold(s, pod_in("c", "3"), whole(2), "n1");
  CHECK(filter(s, pod_in("a", "x"), whole(1), {"n1"}).unresolvable().size() == 1);
  CHECK(filter(s, pod_in("b", "x"), whole(1), {"n1"}).unresolvable().size() == 1);
  CHECK(filter(s, pod_in("c", "x"), whole(1), {"n1"}).unresolvable().at("n1") ==
        "gapless: namespace c over quota \"per-ns\": 2 of 2 whole GPUs in use, pod asks 1");
  CHECK(filter(s, pod_in("d", "x"), whole(1), {"n1"}).passed.size() == 1);
}

TEST_CASE("reserve refuses the second of two pods that both passed filter", "[quota]") {
  Quota q = quota("team-a", {"ml"});
  q.limits[QuotaResource::kWholeGpus] = 3;
  Scheduler s(cluster_of({h100_nvswitch("n1")}), with({q}));
  REQUIRE(filter(s, pod_in("ml", "a"), whole(2), {"n1"}).passed.size() == 1);
  REQUIRE(filter(s, pod_in("ml", "b"), whole(2), {"n1"}).passed.size() == 1);
  hold(s, pod_in("ml", "a"), whole(2), "n1");
  const auto loaded = s.policy();
  const auto r = s.reserve(pod_in("ml", "b"), whole(2), loaded->policy.profiles[0], "n1");
  REQUIRE_FALSE(r);
  CHECK(r.error() ==
        "gapless: namespace ml over quota \"team-a\": 2 of 3 whole GPUs in use, pod asks 2");
  CHECK(allocations(s) == 1);
}

TEST_CASE("usage is read from the model's allocations, however they got there", "[quota]") {
  Quota q = quota("team-a", {"ml"});
  q.limits[QuotaResource::kWholeGpus] = 2;
  Scheduler s(cluster_of({h100_nvswitch("n1")}), with({q}));
  // As the informer does for a pod bound by another replica or a previous run.
  model::Allocation a = alloc("bound", "n1");
  a.pod_ns = "ml";
  a.gpus = {whole_grant(0), whole_grant(1)};
  s.mutate([&](model::Cluster& c) { REQUIRE(c.commit(a)); });
  CHECK(filter(s, pod_in("ml", "x"), whole(1), {"n1"}).unresolvable().size() == 1);
  // The node's inventory replaced (a label change): usage stays.
  s.mutate([](model::Cluster& c) { c.upsert_node(h100_nvswitch("n1")); });
  CHECK(filter(s, pod_in("ml", "x"), whole(1), {"n1"}).unresolvable().size() == 1);
  // The node gone: its pods' usage goes with it.
  s.mutate([](model::Cluster& c) { c.remove_node("n1"); });
  s.mutate([](model::Cluster& c) { c.upsert_node(h100_nvswitch("n1")); });
  CHECK(filter(s, pod_in("ml", "x"), whole(1), {"n1"}).passed.size() == 1);

  // A Scheduler built on a model that already holds allocations (restart recovery) counts them.
  model::Cluster recovered = cluster_of({h100_nvswitch("n1")});
  REQUIRE(recovered.commit(a));
  Scheduler again(std::move(recovered), with({q}));
  CHECK(filter(again, pod_in("ml", "x"), whole(1), {"n1"}).unresolvable().size() == 1);
}

TEST_CASE("a policy reload changes the limits, never the usage", "[quota]") {
  Quota q = quota("team-a", {"ml"});
  q.limits[QuotaResource::kWholeGpus] = 4;
  Scheduler s(cluster_of({h100_nvswitch("n1")}), with({q}));
  hold(s, pod_in("ml", "a"), whole(4), "n1");
  CHECK(filter(s, pod_in("ml", "b"), whole(1), {"n1"}).passed.empty());

  q.limits[QuotaResource::kWholeGpus] = 6;
  s.set_policy(with({q}));
  CHECK(filter(s, pod_in("ml", "b"), whole(2), {"n1"}).passed.size() == 1);
  CHECK(filter(s, pod_in("ml", "b"), whole(3), {"n1"}).unresolvable().at("n1") ==
        "gapless: namespace ml over quota \"team-a\": 4 of 6 whole GPUs in use, pod asks 3");

  q.limits[QuotaResource::kWholeGpus] = 2;  // below usage: nothing evicted, nothing more admitted
  s.set_policy(with({q}));
  CHECK(filter(s, pod_in("ml", "b"), whole(1), {"n1"}).unresolvable().at("n1") ==
        "gapless: namespace ml over quota \"team-a\": 4 of 2 whole GPUs in use, pod asks 1");
  const auto rows = s.quota_rows();
  REQUIRE(rows.size() == 1);
  CHECK(rows[0].quota == "team-a");
  CHECK(rows[0].ns == "ml");
  CHECK(rows[0].resource == "whole_gpus");
  CHECK(rows[0].used == 4);
  CHECK(rows[0].limit == 2);

  s.set_policy(with({}));  // quotas removed: no limit at all
  CHECK(filter(s, pod_in("ml", "b"), whole(4), {"n1"}).passed.size() == 1);
  CHECK(s.quota_rows().empty());
}

TEST_CASE("quota rows: per namespace, per model, percent resolved", "[quota]") {
  Quota q = quota("tenant", {"a", "b"});
  q.limits[QuotaResource::kVramMib] = 50000;
  q.whole_gpus_percent = 50;
  q.per_model[kH100][QuotaResource::kWholeGpus] = 3;
  Scheduler s(cluster_of({h100_nvswitch("n1")}), with({q}));
  hold(s, pod_in("a", "1"), whole(1), "n1");
  hold(s, pod_in("b", "2"), shared(1000, 0), "n1");
  const auto rows = s.quota_rows();
  // Per namespace: whole_gpus (percent: 4 of 8), vram_mib, and the H100 whole-GPU limit.
  REQUIRE(rows.size() == 6);
  CHECK(rows[0].ns == "a");
  CHECK(rows[0].resource == "whole_gpus");
  CHECK(rows[0].used == 1);
  CHECK(rows[0].limit == 4);
  CHECK(rows[1].resource == "vram_mib");
  CHECK(rows[1].used == 0);
  CHECK(rows[2].model == kH100);
  CHECK(rows[2].used == 1);
  CHECK(rows[2].limit == 3);
  CHECK(rows[4].ns == "b");
  CHECK(rows[4].used == 1000);
  CHECK(rows[4].limit == 50000);
}

TEST_CASE("explain shows the quota verdict like filter", "[quota]") {
  Quota q = quota("none", {"ml"});
  q.limits[QuotaResource::kWholeGpus] = 0;
  Scheduler s(cluster_of({h100_nvswitch("n1")}), with({q}));
  const auto loaded = s.policy();
  const auto e = s.explain(pod_in("ml", "x"), whole(1), loaded->policy.profiles[0], {"n1"});
  REQUIRE(e.size() == 1);
  CHECK(e[0].verdict == placement::NodeExplanation::Verdict::kUnresolvable);
  CHECK(e[0].reason_label == "over_quota");
}

TEST_CASE("quota_demand and quota_usage agree on what a pod takes", "[quota]") {
  using placement::quota_demand;
  CHECK(quota_demand(whole(3))[QuotaResource::kWholeGpus] == 3);
  CHECK(quota_demand(shared(100, 20, 3))[QuotaResource::kVramMib] == 300);
  CHECK(quota_demand(shared(100, 20, 3))[QuotaResource::kComputeMilli] == 60);
  CHECK(quota_demand(mig("4g.40gb", 2))[QuotaResource::kMigSlices] == 8);
  CHECK(quota_demand(gpushare(4)).zero());

  const model::Node n = a100_80_mig("a");
  model::Allocation a = alloc("p", "a");
  a.mig = {{0, "3g.40gb", 0}, {1, "1g.10gb+me", 6}};
  const auto u = placement::quota_usage(&n, a);
  CHECK(u.all[QuotaResource::kMigSlices] == 4);
  CHECK(u.by_model.at("nvidia-a100-sxm4-80gb")[QuotaResource::kMigSlices] == 4);
}
