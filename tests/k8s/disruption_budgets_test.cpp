// PodDisruptionBudgets resolved as kube-scheduler resolves them, fed by a PDB informer on the
// (fake) API server and by the pods the pod informer sees: same namespace, selector matched
// against the pods' labels now, nil / empty / invalid selectors matching nothing, pods already
// disrupted left out, disruptionsAllowed as the budget.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <map>
#include <set>
#include <thread>

#include "eventually.h"
#include "fake_api_server.h"
#include "gapless/k8s/api_client.h"
#include "gapless/k8s/disruption_budgets.h"

namespace gapless::k8s {
namespace {

using nlohmann::json;
using test::eventually;
using test::FakeApiServer;

json pdb(const std::string& ns, const std::string& name, const json& selector, int allowed,
         const json& disrupted = json::object()) {
  json o = {{"metadata", {{"namespace", ns}, {"name", name}}},
            {"spec", {{"minAvailable", 1}}},
            {"status", {{"disruptionsAllowed", allowed}, {"disruptedPods", disrupted}}}};
  if (!selector.is_null()) o["spec"]["selector"] = selector;
  return o;
}

model::PodInfo pod(const std::string& ns, const std::string& name, model::Labels labels) {
  model::PodInfo p;
  p.ns = ns;
  p.name = name;
  p.uid = "uid-" + name;
  p.labels = std::move(labels);
  return p;
}

// name -> (covered UIDs, allowed)
std::map<std::string, std::pair<std::set<std::string>, int>> table(const DisruptionBudgets& b) {
  std::map<std::string, std::pair<std::set<std::string>, int>> out;
  for (const auto& r : b.resolve()) out[r.name] = {{r.pods.begin(), r.pods.end()}, r.allowed};
  return out;
}

}  // namespace

TEST_CASE("disruption budgets follow the PDB informer and pods' labels", "[k8s][pdb]") {
  FakeApiServer server;
  ApiClient api(server.client_config());
  DisruptionBudgets budgets;
  budgets.observe_pod(pod("ml", "web-1", {{"app", "web"}}));
  budgets.observe_pod(pod("ml", "web-2", {{"app", "web"}}));
  budgets.observe_pod(pod("ml", "db-1", {{"app", "db"}, {"tier", "1"}}));
  budgets.observe_pod(pod("other", "web-9", {{"app", "web"}}));
  server.add_pdb(pdb("ml", "web", {{"matchLabels", {{"app", "web"}}}}, 1));
  server.add_pdb(
      pdb("ml", "tiered", {{"matchExpressions", {{{"key", "tier"}, {"operator", "Exists"}}}}}, 0));
  server.add_pdb(pdb("ml", "nil-selector", nullptr, 0));
  server.add_pdb(pdb("ml", "empty-selector", json::object(), 0));
  server.add_pdb(pdb("ml", "bad-operator",
                     {{"matchExpressions", {{{"key", "app"}, {"operator", "Equals"}}}}}, 0));
  server.add_pdb(pdb("ml", "disrupted", {{"matchLabels", {{"app", "web"}}}}, 0,
                     {{"web-1", "2026-11-24T02:00:00Z"}}));

  InformerOptions o;
  o.path = "/apis/policy/v1/poddisruptionbudgets";
  Informer informer(api, o, budgets.handlers());
  std::atomic<bool> done{false};
  std::thread thread([&] {
    informer.run();
    done = true;
  });
  REQUIRE(eventually([&] { return budgets.synced(); }));
  using Row = std::pair<std::set<std::string>, int>;
  auto t = table(budgets);
  CHECK(t.at("ml/web") == Row{{"uid-web-1", "uid-web-2"}, 1});  // not other/web-9
  CHECK(t.at("ml/tiered") == Row{{"uid-db-1"}, 0});
  CHECK(t.at("ml/nil-selector") == Row{{}, 0});
  CHECK(t.at("ml/empty-selector") == Row{{}, 0});
  CHECK(t.at("ml/bad-operator") == Row{{}, 0});
  CHECK(t.at("ml/disrupted") == Row{{"uid-web-2"}, 0});

  // The controller recomputes disruptionsAllowed; a budget is deleted; a pod is relabelled or goes.
  server.update_pdb("ml", "web", [](json& p) { p["status"]["disruptionsAllowed"] = 0; });
  server.delete_pdb("ml", "tiered");
  REQUIRE(eventually([&] {
    auto now = table(budgets);
    return now.count("ml/tiered") == 0 && now.at("ml/web").second == 0;
  }));
  budgets.observe_pod(pod("ml", "web-2", {{"app", "cache"}}));
  budgets.forget_pod("uid-web-1");
  CHECK(table(budgets).at("ml/web") == Row{{}, 0});

  informer.stop();
  while (!done) {
    server.close_watches();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  thread.join();
}

TEST_CASE("label selectors from JSON: Kubernetes' shape, anything else refused", "[k8s][pdb]") {
  using Op = model::LabelRequirement::Op;
  auto s = parse_label_selector(json::parse(
      R"({"matchLabels":{"a":"1"},"matchExpressions":[{"key":"b","operator":"NotIn","values":["x"]}]})"));
  REQUIRE(s);
  CHECK(*s == model::LabelSelector{{{"a", "1"}}, {{"b", Op::kNotIn, {"x"}}}});
  for (const char* bad :
       {R"([])", R"({"matchLabels":{"a":1}})", R"({"matchLabels":[]})",
        R"({"matchExpressions":[{"key":"b","operator":"In"}]})",
        R"({"matchExpressions":[{"key":"b","operator":"Exists","values":["x"]}]})",
        R"({"matchExpressions":[{"operator":"Exists"}]})",
        R"({"matchExpressions":[{"key":"b","operator":"In","values":[1]}]})"}) {
    INFO(bad);
    CHECK_FALSE(parse_label_selector(json::parse(bad)));
  }
}

}  // namespace gapless::k8s
