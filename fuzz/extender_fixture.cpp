#include "extender_fixture.h"

#include <cstdio>
#include <nlohmann/json.hpp>
#include <utility>
#include <vector>

#include "fuzz_data.h"
#include "fuzz_util.h"
#include "gapless/k8s/cluster_file.h"
#include "gapless/k8s/node_inventory.h"
#include "gapless/policy/loader.h"

namespace gapless::fuzz {

namespace {

using nlohmann::json;

// The nodes of tests/fixtures/extender/filter-args-full.json (plus gpu-h100-02, as the wire
// fixture tests add it), reduced to what Gapless reads: GFD labels and allocatable.
json gfd_node(const std::string& name, const std::string& product, const std::string& memory,
              const json& allocatable) {
  return {{"metadata",
           {{"name", name},
            {"labels",
             {{"kubernetes.io/hostname", name},
              {"nvidia.com/gpu.product", product},
              {"nvidia.com/gpu.memory", memory}}}}},
          {"status", {{"allocatable", allocatable}}}};
}

std::vector<json> fixture_nodes() {
  return {gfd_node("gpu-h100-01", "NVIDIA-H100-80GB-HBM3", "81559", {{"nvidia.com/gpu", "8"}}),
          gfd_node("gpu-h100-02", "NVIDIA-H100-80GB-HBM3", "81559", {{"nvidia.com/gpu", "8"}}),
          gfd_node("gpu-a100-02", "NVIDIA-A100-SXM4-40GB", "40960", {{"nvidia.com/gpu", "8"}}),
          gfd_node("gpu-a100-mig-03", "NVIDIA-A100-SXM4-40GB", "40960",
                   {{"nvidia.com/gpu", "4"},
                    {"nvidia.com/mig-3g.20gb", "4"},
                    {"nvidia.com/mig-1g.5gb", "14"}})};
}

json pod(const std::string& ns, const std::string& name, const std::string& uid,
         const json& limits) {
  return {
      {"metadata", {{"name", name}, {"namespace", ns}, {"uid", uid}}},
      {"spec",
       {{"containers", json::array({{{"name", "main"}, {"resources", {{"limits", limits}}}}})}}}};
}

struct PodOnNode {
  json pod;
  std::string node;
};

// Bound at setup; UIDs as listed in kBoundUids.
std::vector<PodOnNode> bound_pods() {
  return {
      {pod("ml-team", "victim-a100", kBoundUids[0], {{"nvidia.com/gpu", "4"}}), "gpu-a100-02"},
      {pod("ml-team", "victim-h100-a", kBoundUids[1], {{"nvidia.com/gpu", "4"}}), "gpu-h100-02"},
      {pod("ml-team", "victim-h100-b", kBoundUids[2],
           {{"gapless.io/gpu-memory", "20480"}, {"gapless.io/gpu-compute", "300"}}),
       "gpu-h100-02"},
      {pod("default", "bound-whole", kBoundUids[3], {{"nvidia.com/gpu", "2"}}), "h100-nvs-01"},
      {pod("default", "bound-mig-static", kBoundUids[4], {{"nvidia.com/mig-1g.10gb", "1"}}),
       "a100-mig-01"},
      {pod("default", "bound-mig-reconf", kBoundUids[5], {{"nvidia.com/mig-3g.40gb", "1"}}),
       "a100-mig-01"},
      {pod("default", "bound-mig-pool", kBoundUids[6], {{"nvidia.com/mig-1g.5gb", "1"}}),
       "gpu-a100-mig-03"},
      {pod("default", "bound-gpushare", kBoundUids[7], {{"aliyun.com/gpu-mem", "5"}}),
       "gpushare-01"},
      {pod("default", "bound-stranded", kBoundUids[8], {{"nvidia.com/gpu", "2"}}), "dgx1-v100-02"},
  };
}

// Filtered at setup, not bound; UIDs as listed in kPendingUids.
std::vector<PodOnNode> pending_pods() {
  return {
      {pod("ml-team", "llm-train-0", kPendingUids[0], {{"nvidia.com/gpu", "2"}}), "gpu-h100-01"},
      {pod("default", "pending-shared", kPendingUids[1],
           {{"gapless.io/gpu-memory", "8192"}, {"gapless.io/gpu-shared-count", "2"}}),
       "t4-01"},
      {pod("default", "pending-mig", kPendingUids[2], {{"nvidia.com/mig-2g.20gb", "1"}}),
       "a100-mig-01"},
      {pod("default", "pending-gpushare", kPendingUids[3], {{"aliyun.com/gpu-mem", "3"}}),
       "gpushare-01"},
      {pod("default", "pending-cpu", kPendingUids[4], {{"cpu", "2"}}), "t4-02"},
  };
}

void filter_ok(server::Extender& e, const PodOnNode& p) {
  const std::string answer =
      e.filter(json{{"Pod", p.pod}, {"NodeNames", json::array({p.node})}}.dump());
  const json r = json::parse(answer);
  check(r.at("Error") == "" && r.at("NodeNames") == json::array({p.node}),
        "fixture: setup filter failed", answer);
}

server::Metrics& shared_metrics() {
  static server::Metrics metrics;  // counters only; shared by every fixture
  return metrics;
}

struct Prototype {
  model::Cluster cluster;
  placement::Policy policy;
};

Prototype build_prototype() {
  auto demo = k8s::parse_cluster_file(demo_cluster_yaml(), "examples/demo-cluster.yaml");
  if (!demo) violated("fixture: demo cluster", demo.error());
  model::Cluster cluster = std::move(demo->cluster);
  for (const json& n : fixture_nodes()) {
    auto node = k8s::node_from_json(n);
    if (!node) violated("fixture: node", node.error());
    cluster.upsert_node(std::move(*node));
  }
  auto policy = policy::parse_policy(default_policy_yaml(), "policies/default.yaml");
  if (!policy) violated("fixture: policy", policy.error());

  server::InMemoryBinder binder;
  server::Extender e(std::move(cluster), *policy, binder, shared_metrics());
  for (const PodOnNode& p : bound_pods()) {
    filter_ok(e, p);
    const json& meta = p.pod.at("metadata");
    const std::string answer = e.bind(json{
        {"PodName", meta.at("name")},
        {"PodNamespace", meta.at("namespace")},
        {"PodUID", meta.at("uid")},
        {"Node", p.node}}.dump());
    check(json::parse(answer).at("Error") == "", "fixture: setup bind failed", answer);
  }
  // The informer replaces a node's inventory when the Node object changes; allocations that no
  // longer fit are kept but stranded, and the node is fenced.
  model::Node replaced;
  replaced.name = "dgx1-v100-02";
  model::Gpu gpu;
  gpu.index = 0;
  gpu.uuid = "GPU-replaced-0";
  gpu.model = "Tesla-T4";
  gpu.memory_mib = 15360;
  replaced.gpus.push_back(gpu);
  replaced.links = model::LinkGraph(1);
  Prototype out;
  e.mutate([&](model::Cluster& c) {
    c.upsert_node(std::move(replaced));
    check(c.find_node("dgx1-v100-02")->fenced(), "fixture: stranded node is not fenced");
    out.cluster = c;
  });
  out.policy = std::move(*policy);
  return out;
}

const Prototype& prototype() {
  static const Prototype p = build_prototype();
  return p;
}

bool same_gpu(const model::Gpu& a, const model::Gpu& b) {
  auto instances = [](const model::Gpu& g) {
    std::vector<std::pair<std::string, int>> out;
    for (const model::MigInstance& i : g.mig.instances) out.emplace_back(i.profile, i.start);
    return out;
  };
  return a.index == b.index && a.uuid == b.uuid && a.model == b.model &&
         a.memory_mib == b.memory_mib && a.numa == b.numa && a.healthy == b.healthy &&
         a.mig.enabled == b.mig.enabled && instances(a) == instances(b) &&
         a.mig_family == b.mig_family && a.gpushare_capacity == b.gpushare_capacity &&
         a.used == b.used;
}

// Everything /debug/state shows of the model (and more), compared without rendering JSON:
// rendering it for every input would cost ten times more than the verb itself.
bool same_model(const model::Cluster& a, const model::Cluster& b) {
  const std::vector<const model::Node*> na = a.nodes(), nb = b.nodes();
  if (na.size() != nb.size()) return false;
  for (std::size_t i = 0; i < na.size(); ++i) {
    const model::Node& x = *na[i];
    const model::Node& y = *nb[i];
    if (x.name != y.name || x.source != y.source || x.fence_reason != y.fence_reason ||
        x.mig_pool != y.mig_pool || x.host != y.host || x.host_used != y.host_used ||
        x.whole_pods != y.whole_pods || x.gpus.size() != y.gpus.size() ||
        x.links.size() != y.links.size()) {
      return false;
    }
    for (std::size_t g = 0; g < x.gpus.size(); ++g) {
      if (!same_gpu(x.gpus[g], y.gpus[g])) return false;
    }
  }
  const std::vector<const model::Allocation*> aa = a.allocations(), ab = b.allocations();
  if (aa.size() != ab.size()) return false;
  for (std::size_t i = 0; i < aa.size(); ++i) {
    if (!(*aa[i] == *ab[i])) return false;
  }
  return true;
}

}  // namespace

ExtenderFixture::ExtenderFixture()
    : extender_(std::make_unique<server::Extender>(prototype().cluster, prototype().policy, binder_,
                                                   shared_metrics())) {
  for (const PodOnNode& p : pending_pods()) filter_ok(*extender_, p);
}

void run_verb(ExtenderFixture& fixture, Verb verb, std::string_view body) {
  server::Extender& e = fixture.extender();
  // Every fixture starts from the prototype's model, and /debug/state is deterministic.
  // (The learned workload mix left out: counting the pods a verb sees is learning, not a change.)
  auto model_state = [](const server::Extender& x) {
    json doc = json::parse(x.debug_state());
    doc.erase("workload");
    return doc.dump();
  };
  static const std::string initial = model_state(e);
  std::string answer;
  try {
    switch (verb) {
      case Verb::kFilter:
        answer = e.filter(body);
        break;
      case Verb::kPrioritize:
        answer = e.prioritize(body);
        break;
      case Verb::kBind:
        answer = e.bind(body);
        break;
      case Verb::kPreempt:
        answer = e.preempt(body);
        break;
    }
  } catch (const std::exception& ex) {
    violated("an extender verb threw", ex.what());
  } catch (...) {
    violated("an extender verb threw a non-exception");
  }
  const json parsed = json::parse(answer, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) violated("an extender verb answered with invalid JSON", answer);
  bool may_change = false;
  if (verb == Verb::kBind) {
    const json* error = parsed.is_object() && parsed.contains("Error") ? &parsed["Error"] : nullptr;
    check(error != nullptr && error->is_string(), "bind answered without an Error string", answer);
    may_change = error->get_ref<const std::string&>().empty();
  }
  if (may_change) return;
  bool same = false;
  e.mutate([&](model::Cluster& c) { same = same_model(c, prototype().cluster); });
#ifdef GAPLESS_FUZZ_REPLAY
  // Replaying a handful of files: afford the literal check too.
  same = same && model_state(e) == initial;
#endif
  if (!same) {
    std::fprintf(stderr, "model before:\n%s\nmodel after:\n%s\n", initial.c_str(),
                 e.debug_state().c_str());
    violated("an extender verb changed the model", answer);
  }
}

}  // namespace gapless::fuzz
