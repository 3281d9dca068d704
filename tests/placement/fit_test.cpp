// check_fit: code (fits / full now / unresolvable), metric label and reason per request kind.
#include <catch2/catch.hpp>

#include <functional>
#include <string>
#include <vector>

#include "gapless/model/cluster.h"
#include "gapless/placement/fit.h"
#include "test_nodes.h"

namespace {

using namespace gapless::testnodes;
using gapless::model::Allocation;
using gapless::model::Cluster;
using gapless::model::GpuRequest;
using gapless::model::Node;
using gapless::model::TopologyWish;
using gapless::placement::check_fit;
using gapless::placement::FitCode;

constexpr TopologyWish kReq = TopologyWish::kNvlinkRequired;
constexpr TopologyWish kPref = TopologyWish::kNvlinkPreferred;
const char* const kName = "node-under-test-42";

// Allocations that occupy GPUs before the check.
std::vector<Allocation> wholes(std::vector<int> gpus) {
  std::vector<Allocation> out;
  for (int g : gpus) {
    Allocation a = alloc("w" + std::to_string(g), kName);
    a.gpus = {whole_grant(g)};
    out.push_back(a);
  }
  return out;
}
std::vector<Allocation> migs(std::vector<gapless::model::MigGrant> grants) {
  std::vector<Allocation> out;
  for (const auto& g : grants) {
    Allocation a = alloc("m" + std::to_string(out.size()), kName);
    a.mig = {g};
    out.push_back(a);
  }
  return out;
}
std::vector<Allocation> gpushares(std::vector<std::pair<int, int>> grants) {
  std::vector<Allocation> out;
  for (const auto& [gpu, units] : grants) {
    Allocation a = alloc("g" + std::to_string(out.size()), kName);
    a.gpus = {gpushare_grant(gpu, units)};
    out.push_back(a);
  }
  return out;
}

GpuRequest with_models(GpuRequest r, std::vector<std::string> models) {
  r.models = std::move(models);
  return r;
}

GpuRequest with_wish(GpuRequest r, TopologyWish wish) {
  r.topology = wish;
  return r;
}

Node mixed_node() {
  Node n = h100_nvswitch("x");
  n.gpus.resize(4);
  n.gpus[2].model = n.gpus[3].model = kT4;
  n.links = gapless::model::LinkGraph(4);
  n.links.set(0, 1, nvlink(18));
  normalize(n);
  return n;
}

Node fenced(Node n) {
  n.fence_reason = "allocation record unreadable";
  return n;
}

struct Case {
  const char* what;
  Node node;
  GpuRequest req;
  std::vector<Allocation> held;
  FitCode code;
  const char* label;  // empty when it fits
};

const Node kEmpty = [] {
  Node n;
  n.name = "x";
  return n;
}();

std::vector<Case> cases() {
  return {
      {"kNone fits anywhere", kEmpty, GpuRequest{}, {}, FitCode::kFits, ""},
      {"kNone fits a fenced node", fenced(t4_node()), GpuRequest{}, {}, FitCode::kFits, ""},
      {"no GPUs at all", kEmpty, whole(1), {}, FitCode::kUnresolvable, "no_gpus"},
      {"fenced node", fenced(t4_node()), whole(1), {}, FitCode::kFullNow, "node_fenced"},
      {"too few GPUs in total",
       t4_node(),
       whole(8),
       {},
       FitCode::kUnresolvable,
       "insufficient_capacity"},
      {"all GPUs fit", t4_node(), whole(4), {}, FitCode::kFits, ""},
      {"one GPU taken", t4_node(), whole(4), wholes({2}), FitCode::kFullNow,
       "insufficient_free_gpus"},
      {"model mismatch",
       t4_node(),
       with_models(whole(1), {kH100}),
       {},
       FitCode::kUnresolvable,
       "model_mismatch"},
      {"model match is case-insensitive",
       t4_node(),
       with_models(whole(1), {"x", "TESLA-t4"}),
       {},
       FitCode::kFits,
       ""},
      {"too few GPUs of the allowed model",
       mixed_node(),
       with_models(whole(3), {kH100}),
       {},
       FitCode::kUnresolvable,
       "insufficient_capacity"},
      {"allowed model GPUs taken", mixed_node(), with_models(whole(2), {kH100}), wholes({1}),
       FitCode::kFullNow, "insufficient_free_gpus"},
      {"unhealthy GPU cannot serve",
       with_unhealthy(h100_nvswitch(), 3),
       whole(8),
       {},
       FitCode::kUnresolvable,
       "insufficient_capacity"},
      {"healthy GPUs suffice",
       with_unhealthy(h100_nvswitch(), 3),
       whole(7),
       {},
       FitCode::kFits,
       ""},
      {"vRAM per GPU too small",
       t4_node(),
       shared(16000, 100),
       {},
       FitCode::kUnresolvable,
       "insufficient_capacity"},
      {"shares fit", t4_node(), shared(15360, 1000, 4), {}, FitCode::kFits, ""},
      {"shared GPUs all held", t4_node(), shared(1024, 100, 2), wholes({0, 1, 2}),
       FitCode::kFullNow, "insufficient_free_gpus"},
      {"share on a MIG node",
       a100_80_mig(),
       shared(1024, 100),
       {},
       FitCode::kUnresolvable,
       "insufficient_capacity"},
      {"whole on a MIG node",
       a100_80_mig(),
       whole(1),
       {},
       FitCode::kUnresolvable,
       "insufficient_capacity"},
      {"whole on a gpushare node",
       gpushare_node(),
       whole(1),
       {},
       FitCode::kUnresolvable,
       "insufficient_capacity"},
      {"share on a gpushare node",
       gpushare_node(),
       shared(0, 100),
       {},
       FitCode::kUnresolvable,
       "insufficient_capacity"},
      {"gpushare on a non-gpushare node",
       t4_node(),
       gpushare(4),
       {},
       FitCode::kUnresolvable,
       "insufficient_capacity"},
      {"gpushare above one GPU's capacity",
       gpushare_node("x", 2, 16),
       gpushare(17),
       {},
       FitCode::kUnresolvable,
       "insufficient_capacity"},
      {"gpushare fits", gpushare_node("x", 2, 16), gpushare(16), {}, FitCode::kFits, ""},
      {"gpushare full now", gpushare_node("x", 2, 16), gpushare(8), gpushares({{0, 10}, {1, 9}}),
       FitCode::kFullNow, "insufficient_free_gpus"},
      {"gpushare fits the remainder", gpushare_node("x", 2, 16), gpushare(7),
       gpushares({{0, 10}, {1, 9}}), FitCode::kFits, ""},
      {"MIG on a non-MIG node",
       t4_node(),
       mig("1g.10gb"),
       {},
       FitCode::kUnresolvable,
       "mig_profile_absent"},
      {"MIG profile of another family",
       a100_80_mig(),
       mig("3g.20gb"),
       {},
       FitCode::kUnresolvable,
       "mig_profile_absent"},
      {"more MIG instances than the node could hold",
       a100_80_mig("x", 2),
       mig("1g.10gb", 15),
       {},
       FitCode::kUnresolvable,
       "insufficient_capacity"},
      {"as many as it could hold", a100_80_mig("x", 2), mig("1g.10gb", 14), {}, FitCode::kFits, ""},
      {"+me: one per GPU",
       a100_80_mig("x", 2),
       mig("1g.10gb+me", 3),
       {},
       FitCode::kUnresolvable,
       "insufficient_capacity"},
      {"7g blocked by small instances", a100_80_mig("x", 2), mig("7g.80gb"),
       migs({{0, "1g.10gb", 6}, {1, "1g.10gb", 0}}), FitCode::kFullNow, "insufficient_free_mig"},
      {"static layout lacks the profile",
       a100_40_static(),
       mig("7g.40gb"),
       {},
       FitCode::kUnresolvable,
       "mig_profile_absent"},
      {"static layout holds too few",
       a100_40_static(),
       mig("4g.20gb", 2),
       {},
       FitCode::kUnresolvable,
       "insufficient_capacity"},
      {"static instance taken", a100_40_static(), mig("4g.20gb"), migs({{2, "4g.20gb", 0}}),
       FitCode::kFullNow, "insufficient_free_mig"},
      {"static 2-slice 1g.10gb on A100-40GB",
       a100_40_static(),
       mig("1g.10gb", 4),
       {},
       FitCode::kFits,
       ""},
      {"MIG pool too small",
       mig_pool_node("x", "1g.10gb", 2),
       mig("1g.10gb", 3),
       {},
       FitCode::kUnresolvable,
       "insufficient_capacity"},
      {"MIG pool used up", mig_pool_node("x", "1g.10gb", 2), mig("1g.10gb"),
       migs({{-1, "1g.10gb", -1}, {-1, "1g.10gb", -1}}), FitCode::kFullNow,
       "insufficient_free_mig"},
      {"MIG pool of another profile",
       mig_pool_node("x", "1g.10gb", 2),
       mig("2g.20gb"),
       {},
       FitCode::kUnresolvable,
       "mig_profile_absent"},
      {"nvlink-required on T4",
       t4_node(),
       whole(2, kReq),
       {},
       FitCode::kUnresolvable,
       "no_nvlink_set"},
      {"nvlink-preferred on T4", t4_node(), whole(2, kPref), {}, FitCode::kFits, ""},
      {"nvlink-required for one GPU on T4", t4_node(), whole(1, kReq), {}, FitCode::kFits, ""},
      {"nvlink-required shares on T4",
       t4_node(),
       with_wish(shared(1024, 100, 2), kReq),
       {},
       FitCode::kUnresolvable,
       "no_nvlink_set"},
      {"nvlink-required shares on NVSwitch", h100_nvswitch(), with_wish(shared(1024, 100, 8), kReq),
       wholes({}), FitCode::kFits, ""},
      {"DGX-1: 4 NVLinked free", dgx1_v100(), whole(4, kReq), wholes({0}), FitCode::kFits, ""},
      {"DGX-1: every quad broken", dgx1_v100(), whole(4, kReq), wholes({0, 5}), FitCode::kFullNow,
       "no_free_nvlink_set"},
      {"DGX-1: 3 NVLinked still free", dgx1_v100(), whole(3, kReq), wholes({0, 5}), FitCode::kFits,
       ""},
      {"DGX-1: no 5-GPU NVLink clique",
       dgx1_v100(),
       whole(5, kReq),
       {},
       FitCode::kUnresolvable,
       "no_nvlink_set"},
      {"DGX-1: unhealthy GPUs break both quads",
       with_unhealthy(with_unhealthy(dgx1_v100(), 1), 5),
       whole(4, kReq),
       {},
       FitCode::kUnresolvable,
       "no_nvlink_set"},
      {"DGX-1: one quad unhealthy, the other busy", with_unhealthy(dgx1_v100(), 1), whole(4, kReq),
       wholes({6}), FitCode::kFullNow, "no_free_nvlink_set"},
      {"NVSwitch: all 8 NVLinked", h100_nvswitch(), whole(8, kReq), {}, FitCode::kFits, ""},
      {"NVSwitch: one taken", h100_nvswitch(), whole(8, kReq), wholes({7}), FitCode::kFullNow,
       "insufficient_free_gpus"},
  };
}

}  // namespace

TEST_CASE("check_fit codes and labels", "[placement][fit]") {
  for (Case& c : cases()) {
    DYNAMIC_SECTION(c.what) {
      c.node.name = kName;
      Cluster cluster;
      Node node = c.node;
      node.fence_reason.clear();  // fence after committing what the case holds
      cluster.upsert_node(node);
      for (const Allocation& a : c.held) REQUIRE(cluster.commit(a));
      if (c.node.fenced()) cluster.fence(kName, c.node.fence_reason);

      const auto fit = check_fit(*cluster.find_node(kName), c.req);
      CHECK(fit.code == c.code);
      CHECK(fit.label == c.label);
      CHECK(fit.fits() == (c.code == FitCode::kFits));
      if (fit.fits()) {
        CHECK(fit.reason.empty());
      } else {
        CHECK_THAT(fit.reason, Catch::StartsWith("gapless: "));
        CHECK_THAT(fit.reason, !Catch::Contains(kName));
        CHECK_THAT(fit.reason, !Catch::Contains("42"));
      }
    }
  }
}

TEST_CASE("the same failure gives the same reason on different nodes", "[placement][fit]") {
  const auto a = check_fit(t4_node("small", 2), whole(8));
  const auto b = check_fit(t4_node("large", 6), whole(8));
  CHECK(a.reason == b.reason);
  CHECK(a.label == b.label);
  Node full1 = t4_node("n1", 2), full2 = t4_node("n2", 4);
  for (auto& g : full1.gpus) g.used.whole = true;
  for (auto& g : full2.gpus) g.used.whole = true;
  CHECK(check_fit(full1, whole(1)).reason == check_fit(full2, whole(1)).reason);
  CHECK(check_fit(fenced(t4_node("f1")), whole(1)).reason ==
        check_fit(fenced(gpushare_node("f2")), gpushare(1)).reason);
}

TEST_CASE("reasons name what the pod asked for", "[placement][fit]") {
  CHECK_THAT(check_fit(t4_node(), whole(8)).reason, Catch::Contains("8 whole GPU"));
  CHECK_THAT(check_fit(t4_node(), with_models(whole(1), {"A", "B"})).reason,
             Catch::Contains("A,B"));
  CHECK_THAT(check_fit(a100_80_mig(), mig("3g.20gb")).reason, Catch::Contains("3g.20gb"));
  CHECK_THAT(check_fit(dgx1_v100(), whole(5, kReq)).reason, Catch::Contains("NVLink"));
}
