// Policies through the server: bundle and spread rank a half-full node against an empty one in
// opposite orders; a pod naming a profile the policy lacks gets a filter Error.
#include <catch2/catch.hpp>
#include <map>
#include <string>
#include <vector>

#include "gapless/policy/loader.h"
#include "test_paths.h"
#include "test_server.h"

namespace gapless::test {
namespace {

const char* const kTwoProfiles = R"(version: 1
default: bundle
profiles:
  - name: bundle
    node: {strategies: {bundle: 1}}
    gpu: {strategies: {bundle: 1}}
  - name: spread
    node: {strategies: {spread: 1}}
    gpu: {strategies: {spread: 1}}
)";

const std::vector<std::string> kNodes = {"n-busy", "n-free"};

placement::Policy policy_from(const std::string& yaml, const std::string& source) {
  auto p = policy::parse_policy(yaml, source);
  INFO((p ? std::string() : p.error()));
  REQUIRE(p.ok());
  return std::move(p).value();
}

placement::Policy policy_file(const std::string& name) {
  return policy_from(read_text(gapless::test::source_dir() + "/policies/" + name), name);
}

// Two 8-GPU nodes; n-busy gets a 4-GPU pod bound through the server.
void half_fill(const TestServer& srv) {
  REQUIRE(srv.filter_and_bind(gpu_pod("half", "uid-half", 4), "n-busy") == "");
}

model::Cluster two_nodes() {
  return cluster_of(json::array({gfd_node("n-busy", 8), gfd_node("n-free", 8)}));
}

std::map<std::string, int> scores(const TestServer& srv, const json& pod_json) {
  const json r = srv.call("/prioritize", extender_args(pod_json, kNodes));
  INFO(r.dump());
  REQUIRE(r.is_array());
  std::map<std::string, int> out;
  for (const json& e : r) out[e.at("Host").get<std::string>()] = e.at("Score").get<int>();
  REQUIRE(out.size() == 2);
  return out;
}

}  // namespace

TEST_CASE("shipped bundle and spread policies rank a half-full node oppositely",
          "[server][policy]") {
  const json one_gpu = gpu_pod("one", "uid-one", 1);

  TestServer bundle(two_nodes(), policy_file("bundle.yaml"));
  half_fill(bundle);
  const auto b = scores(bundle, one_gpu);
  CHECK(b.at("n-busy") > b.at("n-free"));
  CHECK(json::parse(bundle.state()).at("policy") == "bundle.yaml");

  TestServer spread(two_nodes(), policy_file("spread.yaml"));
  half_fill(spread);
  const auto s = scores(spread, one_gpu);
  CHECK(s.at("n-free") > s.at("n-busy"));

  // Same model, same pod: only the policy differs.
  CHECK(json::parse(bundle.state()).at("allocations") ==
        json::parse(spread.state()).at("allocations"));
}

TEST_CASE("the gapless.io/policy annotation picks the profile", "[server][policy]") {
  TestServer srv(two_nodes(), policy_from(kTwoProfiles, "two.yaml"));
  half_fill(srv);

  const auto dflt = scores(srv, gpu_pod("d", "uid-d", 1));
  const auto b = scores(srv, gpu_pod("b", "uid-b", 1, {{"gapless.io/policy", "bundle"}}));
  const auto s = scores(srv, gpu_pod("s", "uid-s", 1, {{"gapless.io/policy", "spread"}}));
  CHECK(b.at("n-busy") > b.at("n-free"));
  CHECK(s.at("n-free") > s.at("n-busy"));
  CHECK(dflt == b);  // default: bundle

  // The pod bound with its own profile: spread puts it on the empty node's GPU too.
  srv.call("/filter",
           extender_args(gpu_pod("s", "uid-s", 1, {{"gapless.io/policy", "spread"}}), kNodes));
  CHECK(srv.call("/bind", bind_args("s", "uid-s", "n-free")).at("Error") == "");
}

TEST_CASE("a pod naming a missing profile gets a filter Error", "[server][policy]") {
  TestServer srv(two_nodes(), policy_from(kTwoProfiles, "two.yaml"));
  half_fill(srv);
  const std::string before = srv.state();
  const json lost = gpu_pod("lost", "uid-lost", 1, {{"gapless.io/policy", "nonexistent"}});

  const json f = srv.call("/filter", extender_args(lost, kNodes));
  const std::string error = f.at("Error");
  CHECK(error.find("nonexistent") != std::string::npos);
  CHECK(f.at("NodeNames").is_null());

  // prioritize cannot report it in a HostPriorityList; it answers with Error instead.
  const json p = srv.call("/prioritize", extender_args(lost, kNodes));
  CHECK(p.value("Error", "").find("nonexistent") != std::string::npos);

  CHECK(!srv.call("/bind", bind_args("lost", "uid-lost", "n-free"))
             .at("Error")
             .get<std::string>()
             .empty());
  CHECK(srv.state() == before);
}

TEST_CASE("set_policy applies to the next call", "[server][policy]") {
  TestServer srv(two_nodes(), policy_file("bundle.yaml"));
  half_fill(srv);
  const json one_gpu = gpu_pod("one", "uid-one", 1);
  const auto before = scores(srv, one_gpu);
  CHECK(before.at("n-busy") > before.at("n-free"));
  srv.extender().set_policy(policy_file("spread.yaml"));
  const auto after = scores(srv, one_gpu);
  CHECK(after.at("n-free") > after.at("n-busy"));
  CHECK(json::parse(srv.state()).at("policy") == "spread.yaml");
}

TEST_CASE("filter.keepBest narrows the nodes that pass to the best-scored", "[server][policy]") {
  const char* const keep_one = R"(version: 1
default: bundle
profiles:
  - name: bundle
    node: {strategies: {bundle: 1}}
    gpu: {strategies: {bundle: 1}}
    filter: {keepBest: 1}
  - name: all
    node: {strategies: {bundle: 1}}
    gpu: {strategies: {bundle: 1}}
)";
  TestServer srv(two_nodes(), policy_from(keep_one, "keep-one.yaml"));
  half_fill(srv);  // n-busy ranks first under bundle
  const std::string before = srv.state();

  const json f = srv.call("/filter", extender_args(gpu_pod("one", "uid-one", 1), kNodes));
  INFO(f.dump());
  CHECK(f.at("Error") == "");
  CHECK(f.at("NodeNames") == json::array({"n-busy"}));
  // A node passed, so kube-scheduler reads no reasons and none are sent; a narrowed node never
  // reaches preemption (narrowing leaves at least one node).
  CHECK(f.at("FailedNodes").empty());
  CHECK(f.at("FailedAndUnresolvableNodes").empty());
  CHECK(srv.state() == before);  // filter reserves nothing

  // Explain tells why: the narrowed node is unresolvable, narrowed out by keepBest.
  const json ex = srv.call("/debug/explain", extender_args(gpu_pod("one", "uid-one", 1), kNodes));
  REQUIRE(ex.at("Nodes").size() == 2);
  CHECK(ex.at("Nodes")[0].at("Node") == "n-busy");
  CHECK(ex.at("Nodes")[0].at("Score") == 10);
  CHECK(ex.at("Nodes")[1].at("Verdict") == "unresolvable");
  const std::string why = ex.at("Nodes")[1].at("Reason");
  CHECK(why.find("narrowed out") != std::string::npos);
  CHECK(why.find("keepBest") != std::string::npos);

  // A profile without keepBest passes every node that fits.
  const json all =
      srv.call("/filter",
               extender_args(gpu_pod("two", "uid-two", 1, {{"gapless.io/policy", "all"}}), kNodes));
  CHECK(all.at("NodeNames").size() == 2);
  // Rejected nodes are never counted against keepBest: with one node full, the other passes.
  REQUIRE(srv.filter_and_bind(gpu_pod("fill", "uid-fill", 4), "n-busy") == "");
  const json rest = srv.call("/filter", extender_args(gpu_pod("three", "uid-three", 1), kNodes));
  CHECK(rest.at("NodeNames") == json::array({"n-free"}));
}

}  // namespace gapless::test
