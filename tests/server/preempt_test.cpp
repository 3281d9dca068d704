// The preempt verb end to end: kube-scheduler's request (the fixture's shape) against the demo
// cluster with pods of known priorities; Gapless answers its own victims per node.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "test_server.h"

namespace gapless::test {
namespace {

struct Bound {
  std::string uid;
  int priority;
  std::vector<int> gpus;                                  // whole
  std::vector<std::pair<int, std::int64_t>> shares = {};  // (GPU, MiB)
};

// The demo cluster with `pods` committed on `node`.
model::Cluster demo_with(model::Cluster c, const std::string& node,
                         const std::vector<Bound>& pods) {
  for (const Bound& b : pods) {
    model::Allocation a;
    a.pod_uid = b.uid;
    a.pod_ns = "batch";
    a.pod_name = b.uid;
    a.node = node;
    a.priority = b.priority;
    for (int i : b.gpus) a.gpus.push_back({i, "", 0, 0, 0});
    for (const auto& [i, mib] : b.shares) a.gpus.push_back({i, "", mib, 0, 0});
    auto s = c.commit(a);
    INFO(b.uid << ": " << (s ? "" : s.error()));
    REQUIRE(s);
  }
  return c;
}

json victims(std::vector<std::string> uids, int pdb) {
  json pods = json::array();
  for (const std::string& u : uids) pods.push_back(json{{"UID", u}});
  return {{"Pods", pods}, {"NumPDBViolations", pdb}};
}

// The fixture's request (a 2-GPU pod of priority 100000), NVLink required, with these victims.
json fixture_request(const json& node_victims) {
  json args = fixture("preempt-args.json");
  args["Pod"]["metadata"]["annotations"]["gapless.io/topology"] = "nvlink-required";
  args["NodeNameToMetaVictims"] = node_victims;
  return args;
}

}  // namespace

TEST_CASE("preempt answers Gapless's victims per offered node", "[server][preemption]") {
  model::Cluster c = demo_cluster();
  // DGX-1: one pod per GPU; NVLink pairs inside each quad and i <-> i+4.
  c = demo_with(std::move(c), "dgx1-v100-01",
                {{"d0", 10, {0}},
                 {"d1", 10, {1}},
                 {"d2", 10, {2}},
                 {"d3", 10, {3}},
                 {"d4", 5, {4}},
                 {"d5", 50, {5}},
                 {"d6", 50, {6}},
                 {"d7", 50, {7}}});
  c = demo_with(std::move(c), "h100-nvs-01",
                {{"ha", 1, {0, 1, 2, 3}}, {"hb", 2, {4, 5}}, {"hc", 3, {6}}, {"hd", 3, {7}}});
  c = demo_with(std::move(c), "t4-01", {{"ta", 7, {0, 1}}, {"tb", 3, {2, 3}}});
  // Every pod here is above the preemptor.
  c = demo_with(std::move(c), "dgx1-v100-02", {{"vip", 200000, {0, 1, 2, 3, 4, 5, 6, 7}}});
  TestServer srv(std::move(c));
  const std::string before = srv.state();

  const json args = fixture_request({
      // kube-scheduler's pair (GPUs 1 and 4) is not NVLink-connected: GPUs 0 and 4 are.
      {"dgx1-v100-01", victims({"d1", "d4"}, 0)},
      // Two pods proposed; one pod of lower priority frees four GPUs.
      {"h100-nvs-01", victims({"hd", "hc"}, 1)},
      // PCIe only: an NVLink-required pod can never fit, whoever leaves.
      {"t4-01", victims({"tb"}, 0)},
      {"dgx1-v100-02", victims({"vip"}, 0)},
      {"no-such-node", victims({"x"}, 0)},
  });
  const json r = srv.call("/preempt", args.dump());
  INFO(r.dump());
  // Victims highest priority first; each victim kube-scheduler did not propose counts as a
  // possible PDB violation on top of its count.
  CHECK(r ==
        json{{"NodeNameToMetaVictims",
              {{"dgx1-v100-01", victims({"d0", "d4"}, 1)}, {"h100-nvs-01", victims({"ha"}, 2)}}}});
  CHECK(srv.state() == before);  // preempt changes nothing

  // Same answer when asked again (deterministic).
  CHECK(srv.call("/preempt", args.dump()) == r);
}

TEST_CASE("preempt: a proposal that already frees the right GPUs stands, PDB count kept",
          "[server][preemption]") {
  TestServer srv(demo_with(demo_cluster(), "dgx1-v100-01",
                           {{"d0", 10, {0}},
                            {"d1", 10, {1}},
                            {"d4", 5, {4}},
                            {"d5", 5, {5}},
                            {"d2", 200000, {2, 3, 6, 7}}}));
  // {d4, d5} is an NVLink pair of the lowest priorities: kube-scheduler's own choice stands.
  const json r =
      srv.call("/preempt", fixture_request({{"dgx1-v100-01", victims({"d4", "d5"}, 1)}}).dump());
  CHECK(r == json{{"NodeNameToMetaVictims", {{"dgx1-v100-01", victims({"d4", "d5"}, 1)}}}});
}

TEST_CASE("preempt: shares get victims on a node with none proposed", "[server][preemption]") {
  // t4-02: 4 T4s of 15360 MiB. GPU 0 holds two low shares, GPU 1 one higher share, GPUs 2-3 a
  // whole pod above the preemptor.
  TestServer srv(demo_with(demo_cluster(), "t4-02",
                           {{"s1", 1, {}, {{0, 8000}}},
                            {"s2", 1, {}, {{0, 4000}}},
                            {"s3", 5, {}, {{1, 12000}}},
                            {"w", 500, {2, 3}}}));
  json share = pod("infer", "uid-infer", {{"gapless.io/gpu-memory", "12000"}});
  share["spec"]["priority"] = 100;
  json args = {{"Pod", share}, {"NodeNameToMetaVictims", {{"t4-02", victims({}, 0)}}}};
  json r = srv.call("/preempt", args.dump());
  CHECK(r == json{{"NodeNameToMetaVictims", {{"t4-02", victims({"s3"}, 1)}}}});

  // Priority 3: s3 may not go; both shares of GPU 0 must.
  args["Pod"]["spec"]["priority"] = 3;
  r = srv.call("/preempt", args.dump());
  CHECK(r == json{{"NodeNameToMetaVictims", {{"t4-02", victims({"s1", "s2"}, 2)}}}});

  // Priority 1 (equal to the lowest): no victims, the node is dropped.
  args["Pod"]["spec"]["priority"] = 1;
  CHECK(srv.call("/preempt", args.dump()) == json{{"NodeNameToMetaVictims", json::object()}});
}

TEST_CASE("preempt: priorities learned at bind; full pods' priorities respected",
          "[server][preemption]") {
  TestServer srv(demo_cluster());
  json low = gpu_pod("low", "uid-low", 8);
  low["spec"]["priority"] = 5;
  REQUIRE(srv.filter_and_bind(low, "h100-nvs-02") == "");

  json big = gpu_pod("big", "uid-big", 8);
  big["spec"]["priority"] = 6;
  json args = {{"Pod", big}, {"NodeNameToMetaVictims", {{"h100-nvs-02", victims({}, 0)}}}};
  CHECK(srv.call("/preempt", args.dump()) ==
        json{{"NodeNameToMetaVictims", {{"h100-nvs-02", victims({"uid-low"}, 1)}}}});
  args["Pod"]["spec"]["priority"] = 5;  // equal: never a victim
  CHECK(srv.call("/preempt", args.dump()) == json{{"NodeNameToMetaVictims", json::object()}});

  // Full mode: a proposed pod that holds no GPU is kept unless its priority is not lower.
  args["Pod"]["spec"]["priority"] = 6;
  json sidecar = pod("sidecar", "uid-sidecar", json::object());
  json vip = pod("vip", "uid-vip", json::object());
  vip["spec"]["priority"] = 9;
  args["NodeNameToMetaVictims"] = nullptr;
  args["NodeNameToVictims"] = {
      {"h100-nvs-02", {{"Pods", json::array({vip, sidecar})}, {"NumPDBViolations", 0}}}};
  CHECK(srv.call("/preempt", args.dump()) ==
        json{{"NodeNameToMetaVictims", {{"h100-nvs-02", victims({"uid-low", "uid-sidecar"}, 1)}}}});
}

TEST_CASE("preempt with PodDisruptionBudgets known: violators last, Gapless's own count",
          "[server][preemption][pdb]") {
  TestServer srv(
      demo_with(demo_cluster(), "h100-nvs-01",
                {{"ha", 1, {0, 1, 2, 3}}, {"hb", 2, {4, 5}}, {"hc", 3, {6}}, {"hd", 3, {7}}}));
  std::vector<model::DisruptionBudget> budgets;
  // Called on this thread (not over HTTP): the budgets source is set before serving.
  srv.extender().set_disruption_budgets([&budgets] { return budgets; });
  const std::string args = fixture_request({{"h100-nvs-01", victims({"hd", "hc"}, 1)}}).dump();
  auto preempt = [&] { return json::parse(srv.extender().preempt(args)); };

  // No budget covers them: the lowest priority goes, and nothing is violated (kube-scheduler's
  // count and the unproposed guess no longer apply).
  CHECK(preempt() == json{{"NodeNameToMetaVictims", {{"h100-nvs-01", victims({"ha"}, 0)}}}});
  // ha protected (no disruption allowed): one pod of higher priority, still no violation.
  budgets = {{"batch/ha", {"ha"}, 0}};
  CHECK(preempt() == json{{"NodeNameToMetaVictims", {{"h100-nvs-01", victims({"hb"}, 0)}}}});
  // Everyone protected: the smallest set, its violation counted for kube-scheduler's ranking.
  budgets = {{"batch/all", {"ha", "hb", "hc", "hd"}, 0}};
  CHECK(preempt() == json{{"NodeNameToMetaVictims", {{"h100-nvs-01", victims({"ha"}, 1)}}}});
  // Two disruptions allowed: kube-scheduler's own pair would not have violated either.
  budgets = {{"batch/all", {"ha", "hb", "hc", "hd"}, 2}};
  CHECK(preempt() == json{{"NodeNameToMetaVictims", {{"h100-nvs-01", victims({"ha"}, 0)}}}});
}

}  // namespace gapless::test
