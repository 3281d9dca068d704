// As-deployed mode: the shipped KubeSchedulerConfiguration, combined as kube-scheduler combines
// it, picks the node Gapless ranks best; and the HTTP extender places exactly as the engine does
// in-process.
#include <catch2/catch.hpp>

#include <thread>

#include "bench_policies.h"
#include "deployed.h"
#include "gapless/k8s/cluster_file.h"
#include "gapless/policy/loader.h"
#include "gapless/server/extender.h"
#include "gapless/server/http_server.h"
#include "sweep.h"

using namespace gapless;
using namespace gapless::bench;
using namespace gapless::bench::testing;

namespace {

SweepInput fixture_input() {
  SweepInput in;
  const std::string err = load_inputs(kFixtures + "nodes.csv", {kFixtures + "pods.csv"}, &in);
  REQUIRE(err.empty());
  return in;
}

// Passes every call to the in-process extender and records, for each pod that was scored, the
// score Gapless gave the node kube-scheduler then bound it to.
class Recording : public ExtenderPort {
 public:
  explicit Recording(std::unique_ptr<ExtenderPort> inner) : inner_(std::move(inner)) {}
  bool filter(const TracePod& p, const std::string& uid, const std::vector<std::string>& nodes,
              std::vector<std::string>* passed) override {
    return inner_->filter(p, uid, nodes, passed);
  }
  bool prioritize(const TracePod& p, const std::string& uid, const std::vector<std::string>& nodes,
                  std::vector<int>* scores) override {
    if (!inner_->prioritize(p, uid, nodes, scores)) return false;
    last_.clear();
    for (std::size_t i = 0; i < nodes.size(); ++i) last_[nodes[i]] = (*scores)[i];
    last_uid_ = uid;
    return true;
  }
  bool bind(const TracePod& p, const std::string& uid, const std::string& node,
            std::int64_t* granted) override {
    if (uid == last_uid_) chosen_scores.push_back(last_.at(node));
    return inner_->bind(p, uid, node, granted);
  }
  void bound_elsewhere(const TracePod& p, const std::string& uid,
                       const std::string& node) override {
    inner_->bound_elsewhere(p, uid, node);
  }
  void deleted(const std::string& uid) override { inner_->deleted(uid); }
  void unschedulable(const TracePod& p, const std::string& uid) override {
    inner_->unschedulable(p, uid);
  }
  std::vector<int> chosen_scores;  // Gapless's score of the node each scored pod got

 private:
  std::unique_ptr<ExtenderPort> inner_;
  std::map<std::string, int> last_;
  std::string last_uid_;
};

// Records the nodes each filter call is given; passes them all and binds every pod.
class FilterLog : public ExtenderPort {
 public:
  bool filter(const TracePod&, const std::string&, const std::vector<std::string>& nodes,
              std::vector<std::string>* passed) override {
    calls.push_back(nodes);
    *passed = nodes;
    return true;
  }
  bool prioritize(const TracePod&, const std::string&, const std::vector<std::string>& nodes,
                  std::vector<int>* scores) override {
    scores->assign(nodes.size(), 0);
    return true;
  }
  bool bind(const TracePod&, const std::string&, const std::string&, std::int64_t* g) override {
    *g = 0;
    return true;
  }
  void bound_elsewhere(const TracePod&, const std::string&, const std::string&) override {}
  void deleted(const std::string&) override {}
  void unschedulable(const TracePod&, const std::string&) override {}
  std::vector<std::vector<std::string>> calls;
};

std::vector<model::Node> cpu_nodes(int count) {
  std::vector<model::Node> nodes(static_cast<std::size_t>(count));
  for (int i = 0; i < count; ++i) {
    nodes[static_cast<std::size_t>(i)].name = "n" + std::to_string(i);
    nodes[static_cast<std::size_t>(i)].host = {64000, 262144};
  }
  return nodes;
}

}  // namespace

TEST_CASE("percentageOfNodesToScore: how many feasible nodes a cycle looks for (v1.26)",
          "[bench][deployed]") {
  CHECK(feasible_nodes_to_find(0, 50) == 50);  // below 100 nodes: all
  CHECK(feasible_nodes_to_find(10, 99) == 99);
  CHECK(feasible_nodes_to_find(0, 1000) == 420);   // adaptive: 50 - 1000/125 = 42 %
  CHECK(feasible_nodes_to_find(0, 5000) == 500);   // 50 - 40 = 10 %
  CHECK(feasible_nodes_to_find(0, 10000) == 500);  // at least 5 %
  CHECK(feasible_nodes_to_find(0, 1213) == 497);   // the Alibaba GPU nodes: 41 %
  CHECK(feasible_nodes_to_find(10, 500) == 100);   // at least 100
  CHECK(feasible_nodes_to_find(100, 5000) == 5000);
}

TEST_CASE("the emulated kube-scheduler filters from where the last cycle stopped",
          "[bench][deployed]") {
  const auto nodes = cpu_nodes(300);
  SchedulerConfig c;
  c.has_extender = c.filter_verb = c.bind_verb = true;
  FilterLog ext;
  KubeScheduler ks(nodes, c, ext, 42);
  TracePod pod;
  pod.cpu_milli = 100;
  pod.memory_mib = 100;
  std::int64_t granted = 0;
  for (int i = 0; i < 3; ++i) {
    REQUIRE(ks.schedule(pod, "p" + std::to_string(i), &granted) < nodes.size());
  }
  // Adaptive at 300 nodes: 48 % = 144 nodes a cycle, each cycle after the last one's.
  REQUIRE(ext.calls.size() == 3);
  for (const auto& call : ext.calls) CHECK(call.size() == 144);
  CHECK(ext.calls[0].front() == "n0");
  CHECK(ext.calls[0].back() == "n143");
  CHECK(ext.calls[1].front() == "n144");
  CHECK(ext.calls[2].front() == "n288");
  CHECK(ext.calls[2].back() == "n131");  // wrapped around

  // 100 %: every node, in order, every cycle.
  c.percentage_of_nodes_to_score = 100;
  FilterLog all;
  KubeScheduler full(nodes, c, all, 42);
  for (int i = 0; i < 2; ++i) full.schedule(pod, "q" + std::to_string(i), &granted);
  for (const auto& call : all.calls) {
    CHECK(call.size() == 300);
    CHECK(call.front() == "n0");
  }
}

TEST_CASE("with its models as a node affinity, the sample holds only nodes of those models",
          "[bench][deployed]") {
  auto nodes = cpu_nodes(300);
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    model::Gpu gpu;
    gpu.model = i % 3 == 0 ? "A100" : "T4";
    nodes[i].gpus.push_back(gpu);
  }
  TracePod pod;
  pod.cpu_milli = 100;
  pod.memory_mib = 100;
  pod.num_gpu = 1;
  pod.gpu_milli = 1000;
  pod.gpu_spec = {"A100"};
  std::int64_t granted = 0;
  SchedulerConfig c;
  c.has_extender = c.filter_verb = c.bind_verb = true;

  // Without: kube-scheduler's sample (144 of 300 nodes) is mostly T4 nodes, which the extender
  // alone would have to turn down.
  FilterLog blind;
  KubeScheduler unaware(nodes, c, blind, 42);
  unaware.schedule(pod, "p", &granted);
  REQUIRE(blind.calls.size() == 1);
  CHECK(blind.calls[0].size() == 144);

  // With: its NodeAffinity filter counts only A100 nodes towards the sample, so the extender sees
  // 100 A100 nodes (every third), looked for across the whole cluster.
  c.models_as_node_affinity = true;
  FilterLog aware;
  KubeScheduler ks(nodes, c, aware, 42);
  ks.schedule(pod, "p", &granted);
  REQUIRE(aware.calls.size() == 1);
  CHECK(aware.calls[0].size() == 100);
  for (const std::string& name : aware.calls[0]) CHECK(std::stoi(name.substr(1)) % 3 == 0);

  // The pin is the admission webhook's: names match the labels case-insensitively...
  pod.gpu_spec = {"a100"};
  FilterLog lower;
  KubeScheduler webhook(nodes, c, lower, 42);
  webhook.schedule(pod, "r", &granted);
  REQUIRE(lower.calls.size() == 1);
  CHECK(lower.calls[0] == aware.calls[0]);
  // ...and a name no GPU has leaves the pin to the others.
  pod.gpu_spec = {"A100", "B200"};
  FilterLog partly;
  KubeScheduler rest(nodes, c, partly, 42);
  rest.schedule(pod, "s", &granted);
  REQUIRE(partly.calls.size() == 1);
  CHECK(partly.calls[0] == aware.calls[0]);

  // A pod naming no model is not restricted.
  pod.gpu_spec.clear();
  FilterLog any;
  KubeScheduler free(nodes, c, any, 42);
  free.schedule(pod, "q", &granted);
  REQUIRE(any.calls.size() == 1);
  CHECK(any.calls[0].size() == 144);
}

TEST_CASE("the shipped scheduler configuration, as the emulation reads it", "[bench][deployed]") {
  auto c = load_scheduler_config(kSource + "/manifests/scheduler-config.yaml");
  REQUIRE(c.ok());
  CHECK(c->has_extender);
  CHECK(c->filter_verb);
  CHECK(c->prioritize_verb);
  CHECK(c->bind_verb);
  CHECK(c->managed.empty());  // every pod reaches Gapless
  CHECK(c->fit_weight == 0);
  CHECK(c->balanced_weight == 0);
  CHECK(c->weight * 10 > 1000);  // 10 vs 9 outweighs every score plugin left enabled
  // No percentage: kube-scheduler's adaptive sample (0), as the bench then emulates it.
  CHECK(c->percentage_of_nodes_to_score == 0);

  CHECK_FALSE(parse_scheduler_config("kind: Pod\n", "x").ok());
  CHECK_FALSE(parse_scheduler_config(
                  "kind: KubeSchedulerConfiguration\nextenders:\n- prioritizeVerb: p\n", "x")
                  .ok());  // a prioritize verb needs a positive weight
}

TEST_CASE("kube-scheduler with the shipped configuration binds every pod to Gapless's best node",
          "[bench][deployed]") {
  const SweepInput in = fixture_input();
  const Workload& w = in.workloads[0];
  const Arrivals a = make_arrivals(w, gpu_capacity_milli(in.nodes), in.nodes.size(), 42);
  auto shipped = load_scheduler_config(kSource + "/manifests/scheduler-config.yaml");
  REQUIRE(shipped.ok());
  Recording rec(in_process_extender(in.nodes, shipped_policy()));
  replay_deployed(in.nodes, w, a, *shipped, rec, 42);
  REQUIRE(rec.chosen_scores.size() > 50);
  for (int s : rec.chosen_scores) CHECK(s == 10);

  // The same emulation with a weight of 5 and kube-scheduler's default score plugins (the
  // configuration Gapless shipped before): the plugins move some pods off Gapless's choice.
  SchedulerConfig weak = *shipped;
  weak.weight = 5;
  weak.fit_weight = weak.balanced_weight = 1;
  Recording other(in_process_extender(in.nodes, shipped_policy()));
  replay_deployed(in.nodes, w, a, weak, other, 42);
  CHECK(std::count_if(other.chosen_scores.begin(), other.chosen_scores.end(),
                      [](int s) { return s < 10; }) > 0);
}

TEST_CASE("over HTTP the extender places exactly as the engine does in-process",
          "[bench][deployed][http]") {
  const SweepInput in = fixture_input();
  const Workload& w = in.workloads[0];
  const PolicySetup policy = shipped_policy();
  auto config = load_scheduler_config(kSource + "/manifests/scheduler-config.yaml");
  REQUIRE(config.ok());

  // A live extender on the NodeList gapless-bench --write-cluster writes.
  auto cluster = k8s::parse_cluster_file(cluster_file_json(in.nodes), "bench nodes");
  REQUIRE(cluster.ok());
  auto file_policy = policy::load_policy_file(kSource + "/policies/default.yaml");
  REQUIRE(file_policy.ok());
  server::Metrics metrics;
  server::InMemoryBinder binder;
  server::Extender extender(std::move(cluster->cluster), *file_policy, binder, metrics);
  server::HttpServer http(extender, server::HttpOptions{});
  auto port = http.bind("127.0.0.1", 0);
  REQUIRE(port.ok());
  std::thread serving([&] { http.serve(); });

  const Arrivals a = make_arrivals(w, gpu_capacity_milli(in.nodes), in.nodes.size(), 42);
  auto local = in_process_extender(in.nodes, policy);
  const RunResult engine = replay_deployed(in.nodes, w, a, *config, *local, 42);
  auto remote = http_extender("http://127.0.0.1:" + std::to_string(*port));
  const RunResult over_http = replay_deployed(in.nodes, w, a, *config, *remote, 42);
  REQUIRE(engine.events.size() == over_http.events.size());
  CHECK(engine.failed > 0);  // the trace is tuned to 130 %: the comparison covers refusals too
  CHECK(engine.placed == over_http.placed);
  for (std::size_t i = 0; i < engine.events.size(); ++i) {
    INFO("pod " << i);
    CHECK(engine.events[i].used_milli == over_http.events[i].used_milli);
  }
  CHECK(binder.bindings().size() == static_cast<std::size_t>(over_http.placed));
  http.stop();
  serving.join();
}
