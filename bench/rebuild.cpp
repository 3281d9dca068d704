#include "rebuild.h"

#include <chrono>
#include <nlohmann/json.hpp>

#include "gapless/k8s/allocation_record.h"
#include "gapless/k8s/cluster_sync.h"
#include "gapless/placement/scheduler.h"
#include "synthetic_cluster.h"

namespace gapless::bench {

using nlohmann::json;

namespace {

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// The node's inventory as the agent would publish it (contract.md "Node inventory").
std::string topology_annotation(const model::Node& n) {
  json gpus = json::array();
  for (const model::Gpu& g : n.gpus) {
    json gpu = {{"index", g.index},
                {"uuid", g.uuid},
                {"model", g.model},
                {"memoryMiB", g.memory_mib},
                {"healthy", g.healthy}};
    if (g.mig.enabled) {
      json instances = json::array();
      for (const model::MigInstance& i : g.mig.instances) {
        instances.push_back({{"profile", i.profile}, {"start", i.start}});
      }
      gpu["mig"] = {{"enabled", true}, {"instances", instances}};
    }
    gpus.push_back(std::move(gpu));
  }
  json links = json::array();
  for (int a = 0; a < static_cast<int>(n.gpus.size()); ++a) {
    for (int b = a + 1; b < static_cast<int>(n.gpus.size()); ++b) {
      const model::Link l = n.links.get(a, b);
      if (l.is_nvlink()) {
        links.push_back({{"a", a}, {"b", b}, {"type", "NVLink"}, {"count", l.nvlink_count}});
      }
    }
  }
  return json{{"version", 1}, {"gpus", gpus}, {"links", links}}.dump();
}

json node_object(const model::Node& n) {
  return {
      {"metadata",
       {{"name", n.name}, {"annotations", {{"gapless.io/gpu-topology", topology_annotation(n)}}}}},
      {"status",
       {{"allocatable",
         {{"cpu", "128"}, {"memory", "1Ti"}, {"nvidia.com/gpu", std::to_string(n.gpus.size())}}}}}};
}

// What the pod asked for, so that parse_pod reads back the request the record answers.
json limits_of(const model::Allocation& a) {
  json limits = {{"cpu", "1"}, {"memory", "1Gi"}};
  int whole = 0, shared = 0;
  std::int64_t memory = 0;
  int compute = 0;
  for (const model::GpuGrant& g : a.gpus) {
    if (g.whole()) {
      ++whole;
    } else {
      ++shared;
      memory = g.memory_mib;
      compute = g.compute_milli;
    }
  }
  if (whole > 0) limits["nvidia.com/gpu"] = std::to_string(whole);
  if (shared > 0) {
    if (memory > 0) limits["gapless.io/gpu-memory"] = std::to_string(memory);
    if (compute > 0) limits["gapless.io/gpu-compute"] = std::to_string(compute);
    limits["gapless.io/gpu-shared-count"] = std::to_string(shared);
  }
  std::map<std::string, int> mig;
  for (const model::MigGrant& m : a.mig) ++mig[m.profile];
  for (const auto& [profile, count] : mig) {
    limits["nvidia.com/mig-" + profile] = std::to_string(count);
  }
  return limits;
}

json pod_object(const std::string& uid, const std::string& node, const json& limits,
                const std::string* record) {
  json meta = {{"name", uid}, {"namespace", "bench"}, {"uid", uid}};
  if (record != nullptr) meta["annotations"] = {{"gapless.io/allocation", *record}};
  return {{"metadata", meta},
          {"spec",
           {{"nodeName", node},
            {"containers", json::array({{{"name", "c"}, {"resources", {{"limits", limits}}}}})}}},
          {"status", {{"phase", "Running"}}}};
}

json list(const char* kind, json items) {
  return {{"apiVersion", "v1"}, {"kind", kind}, {"items", std::move(items)}};
}

}  // namespace

RebuildRun run_rebuild(int nodes, int pods_per_node) {
  const model::Cluster source = synthetic_cluster(nodes, 0.5, 1);
  json node_items = json::array();
  for (const model::Node* n : source.nodes()) node_items.push_back(node_object(*n));
  json pod_items = json::array();
  for (const model::Allocation* a : source.allocations()) {
    const std::string record = k8s::encode_allocation_record(*a);
    pod_items.push_back(pod_object(a->pod_uid, a->node, limits_of(*a), &record));
  }
  const json cpu_only = {{"cpu", "2"}, {"memory", "4Gi"}};
  const std::vector<const model::Node*> all = source.nodes();
  for (std::size_t i = 0; pod_items.size() < static_cast<std::size_t>(nodes) * pods_per_node; ++i) {
    pod_items.push_back(
        pod_object("cpu-" + std::to_string(i), all[i % all.size()]->name, cpu_only, nullptr));
  }
  const std::string node_text = list("NodeList", std::move(node_items)).dump();
  const std::string pod_text = list("PodList", std::move(pod_items)).dump();

  RebuildRun run;
  run.nodes = nodes;
  run.list_bytes = node_text.size() + pod_text.size();
  run.expected = source.allocation_count();

  auto t = std::chrono::steady_clock::now();
  auto node_list = json::parse(node_text)["items"].get<std::vector<json>>();
  auto pod_list = json::parse(pod_text)["items"].get<std::vector<json>>();
  run.parse_s = seconds_since(t);
  run.pods = pod_list.size();

  placement::Scheduler sched(model::Cluster{}, placement::builtin_policy(),
                             placement::SchedulerOptions{.check_host = false});
  k8s::ClusterSyncHooks hooks;
  hooks.mutate = [&](const std::function<void(model::Cluster&)>& f) { sched.mutate(f); };
  hooks.observe = [&](const model::PodInfo& p, const model::GpuRequest& r) { sched.observe(p, r); };
  hooks.forget = [&](const std::string& uid) { sched.forget(uid); };
  k8s::ClusterSync sync(std::move(hooks));
  t = std::chrono::steady_clock::now();
  sync.replace_nodes(node_list);
  sync.replace_pods(pod_list);
  run.apply_s = seconds_since(t);
  t = std::chrono::steady_clock::now();
  sync.replace_nodes(node_list);
  run.relist_s = seconds_since(t);
  sched.read([&](const model::Cluster& c) {
    for (const model::Allocation* a : source.allocations()) {
      const model::Allocation* b = c.allocation(a->pod_uid);
      if (b != nullptr && b->node == a->node && b->gpus == a->gpus && b->mig == a->mig) {
        ++run.restored;
      }
    }
  });
  return run;
}

}  // namespace gapless::bench
