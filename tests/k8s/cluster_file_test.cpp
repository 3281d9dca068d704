#include <catch2/catch.hpp>

#include <algorithm>

#include "gapless/k8s/cluster_file.h"
#include "test_paths.h"

using gapless::k8s::load_cluster_file;
using gapless::k8s::parse_cluster_file;
using gapless::model::InventorySource;
using gapless::model::MigFamily;
using gapless::model::PciePath;

namespace {

bool any_contains(const std::vector<std::string>& lines, const std::string& part) {
  return std::any_of(lines.begin(), lines.end(),
                     [&](const std::string& l) { return l.find(part) != std::string::npos; });
}

const char* kJsonCluster = R"({
  "apiVersion": "v1", "kind": "List",
  "items": [
    {"apiVersion": "v1", "kind": "Node",
     "metadata": {"name": "n1", "annotations": {"gapless.io/gpu-topology":
       "{\"version\":1,\"gpus\":[{\"index\":0,\"model\":\"NVIDIA-H100-80GB-HBM3\",\"memoryMiB\":81559},{\"index\":1,\"model\":\"NVIDIA-H100-80GB-HBM3\",\"memoryMiB\":81559}],\"links\":[{\"a\":0,\"b\":1,\"type\":\"NVLink\",\"count\":18}]}"}}},
    {"apiVersion": "v1", "kind": "Pod",
     "metadata": {"name": "train-0", "namespace": "ml", "uid": "uid-1",
                  "annotations": {"gapless.io/allocation": "{\"v\":1,\"node\":\"n1\",\"gpus\":[{\"index\":1}]}"}},
     "spec": {"nodeName": "n1", "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]},
     "status": {"phase": "Running"}}
  ]
})";

// A NodeList (items without kind, as the API server sends them) and a PodList, as two YAML
// documents. Unquoted quantities are YAML integers.
const char* kYamlCluster = R"(# static inventory
apiVersion: v1
kind: NodeList
items:
  - metadata:
      name: t4-a
      labels:
        nvidia.com/gpu.product: Tesla-T4
        nvidia.com/gpu.memory: "15360"
    status:
      allocatable:
        nvidia.com/gpu: 4
  - metadata:
      name: h100-b
      annotations:
        gapless.io/gpu-topology: |
          {"version": 1,
           "gpus": [{"index": 0, "model": "NVIDIA-H100-80GB-HBM3", "memoryMiB": 81559, "numa": 0},
                    {"index": 1, "model": "NVIDIA-H100-80GB-HBM3", "memoryMiB": 81559, "numa": 0}],
           "links": [{"a": 0, "b": 1, "type": "PCIe", "path": "PIX"}]}
---
apiVersion: v1
kind: PodList
items:
  - metadata:
      name: bound
      namespace: ml
      uid: uid-bound
      annotations:
        gapless.io/allocation: '{"v":1,"node":"h100-b","gpus":[{"index":0,"memoryMiB":8192,"computeMilli":500}]}'
    spec:
      nodeName: h100-b
  - metadata:
      name: done
      uid: uid-done
      annotations:
        gapless.io/allocation: '{"v":1,"node":"h100-b","gpus":[{"index":1}]}'
    spec:
      nodeName: h100-b
    status:
      phase: Succeeded
  - metadata:
      name: pending
    spec:
      containers:
        - resources:
            limits:
              nvidia.com/gpu: 1
  - metadata:
      name: no-record
    spec:
      nodeName: t4-a
      containers:
        - resources:
            limits:
              nvidia.com/gpu: 1
  - metadata:
      name: cpu-only
    spec:
      nodeName: t4-a
  - metadata:
      name: corrupt
      namespace: ml
      annotations:
        gapless.io/allocation: '{"v":1,"node":"t4-a","gpus":[{"index":"zero"}]}'
    spec:
      nodeName: t4-a
)";

}  // namespace

TEST_CASE("cluster file: JSON List with a bound pod", "[k8s][cluster]") {
  auto r = parse_cluster_file(kJsonCluster, "cluster.json");
  REQUIRE(r.ok());
  CHECK(r->warnings.empty());
  const auto& cluster = r->cluster;
  REQUIRE(cluster.node_count() == 1);
  const auto* n1 = cluster.find_node("n1");
  REQUIRE(n1 != nullptr);
  CHECK(n1->source == InventorySource::kTopologyAnnotation);
  CHECK(n1->links.get(0, 1).is_nvlink());
  CHECK_FALSE(n1->fenced());

  const auto* a = cluster.allocation("uid-1");
  REQUIRE(a != nullptr);
  CHECK(a->pod_ns == "ml");
  CHECK(a->pod_name == "train-0");
  CHECK(a->node == "n1");
  CHECK(n1->gpus[1].used.whole);
  CHECK_FALSE(n1->gpus[0].used.whole);
}

TEST_CASE("cluster file: YAML documents, skipped pods and a corrupt record", "[k8s][cluster]") {
  auto r = parse_cluster_file(kYamlCluster, "cluster.yaml");
  REQUIRE(r.ok());
  const auto& cluster = r->cluster;
  REQUIRE(cluster.node_count() == 2);

  const auto* t4 = cluster.find_node("t4-a");
  REQUIRE(t4 != nullptr);
  CHECK(t4->source == InventorySource::kFeatureDiscovery);
  CHECK(t4->gpus.size() == 4);
  CHECK(t4->gpus[0].memory_mib == 15360);

  const auto* h100 = cluster.find_node("h100-b");
  REQUIRE(h100 != nullptr);
  CHECK(h100->gpus[0].numa == 0);
  CHECK(h100->links.get(0, 1).path == PciePath::kPIX);
  CHECK_FALSE(h100->fenced());

  // Only the running pod holds anything: the Succeeded one is skipped.
  CHECK(cluster.allocation_count() == 1);
  REQUIRE(cluster.allocation("uid-bound") != nullptr);
  CHECK(h100->gpus[0].used.memory_used_mib == 8192);
  CHECK(h100->gpus[0].used.compute_used_milli == 500);
  CHECK(h100->gpus[1].used.idle());

  // The corrupt record fences its node, and the warning names the pod.
  CHECK(t4->fenced());
  CHECK_THAT(t4->fence_reason, Catch::Contains("ml/corrupt"));
  CHECK(any_contains(r->warnings,
                     "cluster.yaml: pod ml/corrupt: gapless.io/allocation: "
                     "gpus[0].index: must be an integer"));
  CHECK(any_contains(r->warnings, "node t4-a fenced"));
  // A bound GPU pod without a record is reported; a CPU pod is not.
  CHECK(any_contains(r->warnings, "pod default/no-record on node t4-a has no"));
  CHECK_FALSE(any_contains(r->warnings, "cpu-only"));
  CHECK_FALSE(any_contains(r->warnings, "pending"));
  CHECK(r->warnings.size() == 2);
}

TEST_CASE("cluster file: records that do not fit fence the node", "[k8s][cluster]") {
  const std::string node = R"(
  - kind: Node
    metadata:
      name: n1
    status:
      allocatable: {nvidia.com/gpu: "2"}
)";
  auto pod = [](const std::string& name, const std::string& record) {
    return "  - kind: Pod\n    metadata:\n      name: " + name + "\n      uid: " + name +
           "\n      annotations:\n        gapless.io/allocation: '" + record +
           "'\n    spec:\n      nodeName: n1\n";
  };
  SECTION("two pods on one whole GPU") {
    std::string text = "kind: List\nitems:" + node +
                       pod("a", R"({"v":1,"node":"n1","gpus":[{"index":0}]})") +
                       pod("b", R"({"v":1,"node":"n1","gpus":[{"index":0}]})");
    auto r = parse_cluster_file(text, "f");
    REQUIRE(r.ok());
    CHECK(r->cluster.allocation_count() == 1);
    CHECK(r->cluster.find_node("n1")->fenced());
    CHECK(any_contains(r->warnings, "pod default/b: "));
  }
  SECTION("a record naming another node") {
    std::string text =
        "kind: List\nitems:" + node + pod("a", R"({"v":1,"node":"n2","gpus":[{"index":0}]})");
    auto r = parse_cluster_file(text, "f");
    REQUIRE(r.ok());
    CHECK(r->cluster.find_node("n1")->fenced());
    CHECK(any_contains(r->warnings, "record names node n2, pod runs on n1"));
  }
  SECTION("a pod bound to an unknown node") {
    std::string text = "kind: List\nitems:" + node +
                       pod("a", R"({"v":1,"node":"n1","gpus":[{"index":0}]})") +
                       "  - kind: Pod\n    spec: {nodeName: gone}\n"
                       "    metadata: {name: x, annotations: {gapless.io/allocation: '{}'}}\n";
    auto r = parse_cluster_file(text, "f");
    REQUIRE(r.ok());
    CHECK_FALSE(r->cluster.find_node("n1")->fenced());
    CHECK(any_contains(r->warnings, "pod default/x is bound to unknown node gone; ignored"));
  }
}

TEST_CASE("cluster file: errors name the file", "[k8s][cluster]") {
  struct Case {
    std::string text;
    const char* message;
  };
  const Case cases[] = {
      {"{", "f: not valid JSON"},
      {"kind: [", "f: not valid YAML"},
      {"- a\n- b\n", "f: document: must be a Kubernetes object or list"},
      {"kind: List\nitems:\n  - metadata: {name: n1}\n", "f: document.items[0]: kind is missing"},
      {"kind: List\nitems: 3\n", "f: document.items: must be a list"},
      {"kind: Node\nmetadata: {name: n1}\n---\nkind: Node\nmetadata: {name: n1}\n",
       "f: node n1 appears twice"},
      {"kind: Node\nmetadata:\n  name: n1\n  annotations:\n    gapless.io/gpu-topology: '{}'\n",
       "f: node n1: gapless.io/gpu-topology: version: must be 1, got nothing"},
      {"kind: Node\nmetadata: {name: n1}\nstatus: {allocatable: {nvidia.com/gpu: 1.5}}\n",
       "f: node n1: nvidia.com/gpu: must be a whole number, got \"1.5\""},
      {"kind: Node\nmetadata: {name: n1}\nstatus: {allocatable: {nvidia.com/gpu: -2}}\n",
       "f: node n1: nvidia.com/gpu: must be a whole number, got \"-2\""},
  };
  for (const Case& c : cases) {
    INFO(c.text);
    auto r = parse_cluster_file(c.text, "f");
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.error(), Catch::StartsWith(c.message));
  }
}

// Found by fuzz/cluster_file_fuzz.cpp (fuzz/regressions/cluster_file/).
TEST_CASE("cluster file: hostile YAML ends quickly with an error", "[k8s][cluster]") {
  // yaml-cpp 0.7's LoadAll looped forever (allocating) on a document starting with ','.
  for (const char* text : {",", "kind: List\n---\n,\n", ",1eannotations: x"}) {
    INFO(text);
    auto r = parse_cluster_file(text, "f");
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.error(), Catch::StartsWith("f: not valid YAML: "));
  }
  // Nine levels of ten aliases: 10^9 nodes from 430 bytes. The node budget follows the file's
  // size, so this stops after a few thousand nodes instead of 10 million.
  std::string bomb = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n";
  for (int i = 1; i < 9; ++i) {
    bomb += "a" + std::to_string(i) + ": &a" + std::to_string(i) + " [";
    for (int j = 0; j < 10; ++j) bomb += (j ? ", *a" : "*a") + std::to_string(i - 1);
    bomb += "]\n";
  }
  auto r = parse_cluster_file(bomb, "f");
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.error(), Catch::StartsWith("f: YAML document too large"));
  // Deep JSON is refused like deep YAML.
  auto deep = parse_cluster_file(std::string(100000, '[') + std::string(100000, ']'), "f");
  REQUIRE_FALSE(deep.ok());
  CHECK(deep.error() == "f: not valid JSON: nested deeper than 512 levels");
}

TEST_CASE("cluster file: YAML scalars", "[k8s][cluster]") {
  // Quoted scalars stay strings ("true" is not a bool, "0x1" not a number); unknown kinds warn.
  auto r = parse_cluster_file(
      "kind: Node\nmetadata:\n  name: \"007\"\n  labels: {nvidia.com/gpu.count: '2'}\n"
      "---\n---\nkind: ConfigMap\nmetadata: {name: x}\n",
      "f");
  REQUIRE(r.ok());
  REQUIRE(r->cluster.find_node("007") != nullptr);
  CHECK(r->cluster.find_node("007")->gpus.size() == 2);
  CHECK(any_contains(r->warnings, "f: document 2: ignoring kind ConfigMap"));

  // An unquoted number as the node name is not a string: the node has no name.
  auto bad = parse_cluster_file("kind: Node\nmetadata: {name: 7}\n", "f");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error() == "f: node: metadata.name is missing");
}

TEST_CASE("cluster file: load from disk", "[k8s][cluster]") {
  auto missing = load_cluster_file("/nonexistent/cluster.yaml");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error() == "cannot open cluster file /nonexistent/cluster.yaml");
}

TEST_CASE("the demo cluster loads", "[k8s][cluster][demo]") {
  auto r = load_cluster_file(gapless::test::source_dir() + "/examples/demo-cluster.yaml");
  REQUIRE(r.ok());
  CHECK(r->warnings.empty());
  const auto& c = r->cluster;
  REQUIRE(c.node_count() == 9);
  std::size_t gpus = 0;
  for (const auto* n : c.nodes()) {
    gpus += n->gpus.size();
    CHECK_FALSE(n->fenced());
  }
  CHECK(gpus == 6 * 8 + 2 * 4 + 2);

  for (const char* name : {"h100-nvs-01", "h100-nvs-02"}) {
    const auto* n = c.find_node(name);
    REQUIRE(n != nullptr);
    CHECK(n->source == InventorySource::kTopologyAnnotation);
    CHECK(n->gpus.size() == 8);
    CHECK(n->gpus[3].numa == 0);
    CHECK(n->gpus[4].numa == 1);
    CHECK(n->gpus[0].uuid.rfind("GPU-", 0) == 0);
    for (int i = 0; i < 8; ++i) CHECK(n->links.nvlink_degree(i) == 7);
    CHECK(n->links.get(2, 6).nvlink_count == 18);
  }
  for (const char* name : {"dgx1-v100-01", "dgx1-v100-02"}) {
    const auto* n = c.find_node(name);
    REQUIRE(n != nullptr);
    CHECK(n->gpus[0].model == "Tesla-V100-SXM2-32GB");
    for (int i = 0; i < 8; ++i) CHECK(n->links.nvlink_degree(i) == 4);  // 6 lanes to 4 peers
    CHECK(n->links.get(0, 3).nvlink_count == 2);
    CHECK(n->links.get(0, 1).nvlink_count == 1);
    CHECK(n->links.get(0, 4).is_nvlink());
    CHECK_FALSE(n->links.get(0, 5).is_nvlink());
    CHECK(n->links.get(0, 5).path == PciePath::kSYS);
  }
  const auto* mig = c.find_node("a100-mig-01");
  REQUIRE(mig != nullptr);
  CHECK(mig->gpus[0].mig_family == MigFamily::kA100_80GB);
  CHECK(mig->gpus[0].mig.instances.size() == 3);
  CHECK(mig->gpus[1].mig.instances.size() == 7);
  CHECK(mig->gpus[1].used.mig_instance_used.size() == 7);
  for (int i = 4; i < 8; ++i) CHECK(mig->gpus[i].mig.reconfigurable());
  const auto* a100 = c.find_node("a100-02");
  REQUIRE(a100 != nullptr);
  CHECK(a100->gpus[7].model == "NVIDIA-A100-SXM4-40GB");
  CHECK_FALSE(a100->gpus[7].mig.enabled);
  for (const char* name : {"t4-01", "t4-02"}) {
    const auto* n = c.find_node(name);
    REQUIRE(n != nullptr);
    CHECK(n->source == InventorySource::kFeatureDiscovery);
    CHECK(n->gpus.size() == 4);
    CHECK(n->gpus[0].model == "Tesla-T4");
    CHECK(n->gpus[0].memory_mib == 15360);
  }
  const auto* share = c.find_node("gpushare-01");
  REQUIRE(share != nullptr);
  CHECK(share->source == InventorySource::kGpushare);
  CHECK(share->gpus.size() == 2);
  CHECK(share->gpus[1].gpushare_capacity == 15);
}
