// node_fit.h: kube-scheduler's nodeSelector, required node affinity and taint rules, as the bind
// check applies them; node_facts.h: reading them from Pod and Node JSON.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "gapless/k8s/node_facts.h"
#include "gapless/k8s/node_fit.h"

using namespace gapless::k8s;
using nlohmann::json;

namespace {

NodeFacts gpu_node() {
  return NodeFacts{"n1", {{"gpu", "h100"}, {"zone", "a"}, {"cores", "64"}}, {}, false};
}

NodeSelectorTerm labels_term(std::vector<NodeSelectorRequirement> r) {
  return NodeSelectorTerm{std::move(r), {}};
}

PodPlacement with_terms(std::vector<NodeSelectorTerm> terms) {
  PodPlacement p;
  p.required_terms = std::move(terms);
  return p;
}

}  // namespace

TEST_CASE("node selector requirements: each operator on labels", "[k8s][node_fit]") {
  const auto labels = gpu_node().labels;
  auto m = [&](std::string key, std::string op, std::vector<std::string> values = {}) {
    return requirement_matches({std::move(key), std::move(op), std::move(values)}, labels);
  };
  CHECK(m("gpu", "In", {"a100", "h100"}));
  CHECK_FALSE(m("gpu", "In", {"a100"}));
  CHECK_FALSE(m("missing", "In", {"h100"}));
  CHECK_FALSE(m("gpu", "In"));  // no values: malformed

  CHECK(m("gpu", "NotIn", {"a100"}));
  CHECK(m("missing", "NotIn", {"a100"}));  // absent label: NotIn holds
  CHECK_FALSE(m("gpu", "NotIn", {"h100"}));

  CHECK(m("zone", "Exists"));
  CHECK_FALSE(m("missing", "Exists"));
  CHECK(m("missing", "DoesNotExist"));
  CHECK_FALSE(m("zone", "DoesNotExist"));

  CHECK(m("cores", "Gt", {"32"}));
  CHECK_FALSE(m("cores", "Gt", {"64"}));
  CHECK(m("cores", "Lt", {"65"}));
  CHECK_FALSE(m("cores", "Lt", {"64"}));
  CHECK_FALSE(m("gpu", "Gt", {"1"}));          // label not an integer
  CHECK_FALSE(m("cores", "Gt", {"1", "2"}));   // more than one value
  CHECK_FALSE(m("cores", "Gt", {"ten"}));      // value not an integer
  CHECK_FALSE(m("missing", "Lt", {"100"}));    // no label
  CHECK_FALSE(m("gpu", "Matches", {"h100"}));  // unknown operator
}

TEST_CASE("required node affinity: terms ORed, requirements ANDed", "[k8s][node_fit]") {
  const NodeFacts node = gpu_node();
  const NodeSelectorRequirement h100{"gpu", "In", {"h100"}};
  const NodeSelectorRequirement zone_b{"zone", "In", {"b"}};

  CHECK_FALSE(node_misfit(with_terms({labels_term({h100})}), node));
  // One failing expression fails its term.
  CHECK(node_misfit(with_terms({labels_term({h100, zone_b})}), node));
  // Another term matching is enough.
  CHECK_FALSE(node_misfit(with_terms({labels_term({zone_b}), labels_term({h100})}), node));
  // No terms, or only an empty term: no node passes.
  CHECK(node_misfit(with_terms({}), node));
  CHECK(node_misfit(with_terms({NodeSelectorTerm{}}), node));
  // No required affinity at all: every node passes.
  CHECK_FALSE(node_misfit(PodPlacement{}, node));

  SECTION("matchFields on metadata.name") {
    auto fields = [](std::string op, std::vector<std::string> values) {
      return NodeSelectorTerm{{}, {{"metadata.name", std::move(op), std::move(values)}}};
    };
    CHECK_FALSE(node_misfit(with_terms({fields("In", {"n1"})}), node));
    CHECK(node_misfit(with_terms({fields("In", {"n2"})}), node));
    CHECK_FALSE(node_misfit(with_terms({fields("NotIn", {"n2"})}), node));
    CHECK(node_misfit(with_terms({fields("NotIn", {"n1"})}), node));
    CHECK(node_misfit(with_terms({fields("In", {"n1", "n2"})}), node));  // one value only
    CHECK(node_misfit(with_terms({fields("Exists", {})}), node));
    // Fields and expressions of one term are ANDed.
    NodeSelectorTerm both = fields("In", {"n1"});
    both.match_expressions = {zone_b};
    CHECK(node_misfit(with_terms({both}), node));
  }
}

TEST_CASE("nodeSelector: every pair must equal the node's label", "[k8s][node_fit]") {
  PodPlacement p;
  p.node_selector = {{"gpu", "h100"}, {"zone", "a"}};
  CHECK_FALSE(node_misfit(p, gpu_node()));
  p.node_selector["zone"] = "b";
  CHECK(node_misfit(p, gpu_node()) ==
        "has nodeSelector zone=b, which node n1 does not match (its label is a)");
  p.node_selector = {{"pool", "train"}};
  CHECK(node_misfit(p, gpu_node()) ==
        "has nodeSelector pool=train, which node n1 does not match (it has no label pool)");
}

TEST_CASE("taints and tolerations", "[k8s][node_fit]") {
  const Taint dedicated{"dedicated", "ml", "NoSchedule"};
  CHECK(tolerates({"dedicated", "Equal", "ml", "NoSchedule"}, dedicated));
  CHECK(tolerates({"dedicated", "", "ml", ""}, dedicated));  // no operator = Equal; any effect
  CHECK_FALSE(tolerates({"dedicated", "Equal", "web", "NoSchedule"}, dedicated));
  CHECK(tolerates({"dedicated", "Exists", "", "NoSchedule"}, dedicated));
  CHECK_FALSE(tolerates({"dedicated", "Exists", "", "NoExecute"}, dedicated));
  CHECK_FALSE(tolerates({"other", "Exists", "", ""}, dedicated));
  CHECK(tolerates({"", "Exists", "", ""}, dedicated));  // empty key + Exists: every taint
  CHECK_FALSE(tolerates({"dedicated", "Gt", "ml", ""}, dedicated));

  NodeFacts node = gpu_node();
  node.taints = {dedicated, {"soft", "", "PreferNoSchedule"}};
  PodPlacement pod;
  CHECK(node_misfit(pod, node) == "does not tolerate taint dedicated=ml:NoSchedule of node n1");
  pod.tolerations = {{"dedicated", "Equal", "ml", "NoSchedule"}};
  CHECK_FALSE(node_misfit(pod, node));  // PreferNoSchedule never blocks

  node.taints.push_back({"evict", "", "NoExecute"});
  CHECK(node_misfit(pod, node) == "does not tolerate taint evict:NoExecute of node n1");
  pod.tolerations.push_back({"evict", "Exists", "", "NoExecute"});
  CHECK_FALSE(node_misfit(pod, node));

  SECTION("a cordoned node is its unschedulable taint") {
    node.unschedulable = true;
    CHECK(node_misfit(pod, node) ==
          "does not tolerate taint node.kubernetes.io/unschedulable:NoSchedule of node n1");
    pod.tolerations.push_back({kUnschedulableTaintKey, "Exists", "", "NoSchedule"});
    CHECK_FALSE(node_misfit(pod, node));
  }
}

TEST_CASE("placement and node facts read from Kubernetes JSON", "[k8s][node_fit]") {
  const json pod = json::parse(R"({"spec": {
    "nodeSelector": {"gpu": "h100"},
    "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
      "nodeSelectorTerms": [
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a", "b"]}]},
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n9"]}]}]}}},
    "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "ml",
                     "effect": "NoSchedule"}]}})");
  const PodPlacement p = read_pod_placement(pod);
  CHECK(p.node_selector == std::map<std::string, std::string>{{"gpu", "h100"}});
  REQUIRE(p.required_terms);
  REQUIRE(p.required_terms->size() == 2);
  CHECK(p.required_terms->at(0).match_expressions.at(0).values ==
        std::vector<std::string>{"a", "b"});
  CHECK(p.required_terms->at(1).match_fields.at(0).key == "metadata.name");
  REQUIRE(p.tolerations.size() == 1);
  CHECK(p.tolerations[0].value == "ml");

  const json node = json::parse(R"({"metadata": {"name": "n1", "labels": {"gpu": "h100",
    "zone": "c"}}, "spec": {"unschedulable": true, "taints": [{"key": "dedicated",
    "value": "ml", "effect": "NoSchedule"}]}})");
  const NodeFacts n = read_node_facts(node);
  CHECK(n.name == "n1");
  CHECK(n.unschedulable);
  REQUIRE(n.taints.size() == 1);
  CHECK(n.taints[0].effect == "NoSchedule");
  // zone c matches neither term's zone nor n9.
  CHECK(node_misfit(p, n) == "has a required node affinity that node n1 does not match");

  SECTION("a requirement Gapless cannot read matches nothing") {
    const json odd = json::parse(R"({"spec": {"affinity": {"nodeAffinity": {
      "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [7]}]}}}}})");
    CHECK(node_misfit(read_pod_placement(odd), n));
  }
  SECTION("the store follows the node informer") {
    NodeFactsStore store;
    store.replace({node});
    REQUIRE(store.find("n1"));
    CHECK_FALSE(store.find("n2"));
    json changed = node;
    changed["spec"]["taints"] = json::array();
    store.apply("MODIFIED", changed);
    CHECK(store.find("n1")->taints.empty());
    store.apply("DELETED", changed);
    CHECK_FALSE(store.find("n1"));
  }
}
