#include <catch2/catch.hpp>

#include "gapless/k8s/json_fields.h"
#include "gapless/k8s/node_inventory.h"
#include "test_paths.h"

using gapless::k8s::node_from_json;
using gapless::k8s::node_from_topology_annotation;
using gapless::model::InventorySource;
using gapless::model::Link;
using gapless::model::MigFamily;
using gapless::model::MigPool;
using gapless::model::PciePath;
using nlohmann::json;

namespace {

json fixture_nodes() {
  return json::parse(
      gapless::test::fixture_text("extender/filter-args-full.json"))["Nodes"]["items"];
}

json bare_node(const char* name) {
  return {{"metadata", {{"name", name}}}};
}

// Two A100-80GB GPUs: GPU 0 with a static MIG layout, GPU 1 reconfigurable.
const char* kGoodTopology = R"({
  "version": 1,
  "gpus": [
    {"index": 1, "uuid": "GPU-b", "model": "NVIDIA-A100-SXM4-80GB", "memoryMiB": 81920,
     "numa": 1, "healthy": false, "mig": {"enabled": true, "instances": []}},
    {"index": 0, "uuid": "GPU-a", "model": "NVIDIA-A100-SXM4-80GB", "memoryMiB": 81920,
     "mig": {"enabled": true, "instances": [{"profile": "3g.40gb", "start": 4},
                                            {"profile": "1g.10gb", "start": 0},
                                            {"profile": "1g.10gb+me", "start": 1}]}},
    {"index": 2, "model": "NVIDIA-A100-SXM4-80GB", "memoryMiB": 81920},
    {"index": 3, "model": "NVIDIA-A100-SXM4-80GB", "memoryMiB": 81920, "mig": {"enabled": false}}
  ],
  "links": [
    {"a": 0, "b": 1, "type": "NVLink", "count": 12},
    {"a": 2, "b": 1, "type": "NVLink", "count": 4, "degraded": true},
    {"a": 0, "b": 2, "type": "PCIe", "path": "PIX"},
    {"a": 3, "b": 0, "type": "PCIe", "path": "NODE", "degraded": false}
  ]
})";

}  // namespace

TEST_CASE("GFD inventory from the nodes of a real extender request", "[k8s][inventory]") {
  const json nodes = fixture_nodes();
  REQUIRE(nodes.size() == 3);

  auto h100 = node_from_json(nodes[0]);
  REQUIRE(h100.ok());
  CHECK(h100->name == "gpu-h100-01");
  CHECK(h100->source == InventorySource::kFeatureDiscovery);
  REQUIRE(h100->gpus.size() == 8);
  CHECK(h100->links.size() == 8);
  for (int i = 0; i < 8; ++i) {
    const auto& g = h100->gpus[i];
    CHECK(g.index == i);
    CHECK(g.model == "NVIDIA-H100-80GB-HBM3");
    CHECK(g.memory_mib == 81559);
    CHECK(g.uuid.empty());
    CHECK(g.numa == -1);
    CHECK(g.healthy);
    CHECK(g.mig_family == MigFamily::kH100_80GB);
    CHECK_FALSE(g.mig.enabled);
  }
  Link l = h100->links.get(0, 7);
  CHECK(l.kind == Link::Kind::kPCIe);
  CHECK(l.path == PciePath::kSYS);
  CHECK(h100->mig_pool.empty());

  auto a100 = node_from_json(nodes[1]);
  REQUIRE(a100.ok());
  CHECK(a100->gpus.size() == 8);
  CHECK(a100->gpus[3].memory_mib == 81920);
  CHECK(a100->gpus[3].mig_family == MigFamily::kA100_80GB);

  auto mig = node_from_json(nodes[2]);
  REQUIRE(mig.ok());
  CHECK(mig->name == "gpu-a100-mig-03");
  CHECK(mig->source == InventorySource::kFeatureDiscovery);
  REQUIRE(mig->gpus.size() == 4);
  CHECK(mig->gpus[0].model == "NVIDIA-A100-SXM4-40GB");
  CHECK(mig->gpus[0].memory_mib == 40960);
  CHECK(mig->mig_pool == std::map<std::string, MigPool>{{"3g.20gb", {4, 0}}, {"1g.5gb", {14, 0}}});
}

TEST_CASE("GFD inventory edge cases", "[k8s][inventory]") {
  SECTION("labels alone, when the device plugin lists nothing") {
    json n = bare_node("n1");
    n["metadata"]["labels"] = {{"nvidia.com/gpu.count", "2"},
                               {"nvidia.com/gpu.product", "Tesla-T4"},
                               {"nvidia.com/gpu.memory", "15360"}};
    auto r = node_from_json(n);
    REQUIRE(r.ok());
    CHECK(r->source == InventorySource::kFeatureDiscovery);
    REQUIRE(r->gpus.size() == 2);
    CHECK(r->gpus[1].model == "Tesla-T4");
    CHECK(r->gpus[1].memory_mib == 15360);
    CHECK(r->gpus[1].mig_family == MigFamily::kNone);

    // A listed 0 means the device plugin offers none right now: the label does not override it.
    n["status"]["allocatable"] = {{"nvidia.com/gpu", "0"}};
    CHECK(node_from_json(n)->gpus.empty());
  }
  SECTION("capacity fills in when allocatable is absent; YAML integers count") {
    json n = bare_node("n1");
    n["status"]["capacity"] = {{"nvidia.com/gpu", 3}, {"nvidia.com/mig-1g.10gb.me", "1"}};
    auto r = node_from_json(n);
    REQUIRE(r.ok());
    CHECK(r->gpus.size() == 3);
    CHECK(r->gpus[0].model.empty());
    CHECK(r->gpus[0].memory_mib == 0);
    CHECK(r->mig_pool.at("1g.10gb+me").total == 1);
  }
  SECTION("a node without GPUs is fine") {
    json n = bare_node("cpu-01");
    n["status"]["allocatable"] = {{"cpu", "64"}, {"memory", "256Gi"}};
    auto r = node_from_json(n);
    REQUIRE(r.ok());
    CHECK(r->gpus.empty());
    CHECK(r->mig_pool.empty());
  }
}

TEST_CASE("gpushare inventory", "[k8s][inventory]") {
  json n = bare_node("share-01");
  n["status"]["capacity"] = {{"aliyun.com/gpu-count", "2"}, {"aliyun.com/gpu-mem", "31"}};
  // GFD may run on gpushare nodes too; without nvidia.com/gpu the node is still gpushare.
  n["metadata"]["labels"] = {{"nvidia.com/gpu.count", "2"}, {"nvidia.com/gpu.product", "Tesla-T4"}};
  auto r = node_from_json(n);
  REQUIRE(r.ok());
  CHECK(r->source == InventorySource::kGpushare);
  REQUIRE(r->gpus.size() == 2);
  for (const auto& g : r->gpus) {
    CHECK(g.gpushare_capacity == 15);
    CHECK(g.memory_mib == 0);
    CHECK(g.model == "Tesla-T4");
  }
  CHECK(r->links.size() == 2);
}

TEST_CASE("bad Node objects", "[k8s][inventory]") {
  json bad_label = bare_node("n1");
  bad_label["metadata"]["labels"] = {{"nvidia.com/gpu.memory", "16Gi"}};
  bad_label["status"]["allocatable"] = {{"nvidia.com/gpu", "1"}};
  json bad_alloc = bare_node("n1");
  bad_alloc["status"]["allocatable"] = {{"nvidia.com/gpu", "one"}};
  json bad_annotation = bare_node("n1");
  bad_annotation["metadata"]["annotations"] = {{"gapless.io/gpu-topology", {{"version", 1}}}};
  json huge = bare_node("n1");
  huge["status"]["allocatable"] = {{"nvidia.com/gpu", "100000"}};

  struct Case {
    json node;
    const char* message;
  };
  const Case cases[] = {
      {json::array(), "node: must be a JSON object"},
      {json::object(), "node: metadata.name is missing"},
      {bad_label, "node n1: label nvidia.com/gpu.memory: must be a whole number, got \"16Gi\""},
      {bad_alloc, "node n1: nvidia.com/gpu: must be a whole number, got \"one\""},
      {bad_annotation, "node n1: gapless.io/gpu-topology: must be a string"},
      {huge, "node n1: nvidia.com/gpu: 100000 GPUs is more than 64"},
  };
  for (const Case& c : cases) {
    auto r = node_from_json(c.node);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error() == c.message);
  }
}

TEST_CASE("topology annotation: a valid one", "[k8s][inventory]") {
  json n = bare_node("a100-x");
  n["metadata"]["annotations"] = {{"gapless.io/gpu-topology", kGoodTopology}};
  // The annotation wins over GFD labels and allocatable.
  n["status"]["allocatable"] = {{"nvidia.com/gpu", "8"}};
  auto r = node_from_json(n);
  REQUIRE(r.ok());
  CHECK(r->name == "a100-x");
  CHECK(r->source == InventorySource::kTopologyAnnotation);
  REQUIRE(r->gpus.size() == 4);
  for (int i = 0; i < 4; ++i) CHECK(r->gpus[i].index == i);

  const auto& g0 = r->gpus[0];
  CHECK(g0.uuid == "GPU-a");
  CHECK(g0.numa == -1);
  CHECK(g0.healthy);
  CHECK(g0.mig_family == MigFamily::kA100_80GB);
  CHECK(g0.mig.enabled);
  REQUIRE(g0.mig.instances.size() == 3);
  CHECK(g0.mig.instances[0].profile == "3g.40gb");
  CHECK(g0.mig.instances[0].start == 4);
  CHECK(g0.used.mig_instance_used == std::vector<bool>{false, false, false});

  const auto& g1 = r->gpus[1];
  CHECK(g1.uuid == "GPU-b");
  CHECK(g1.numa == 1);
  CHECK_FALSE(g1.healthy);
  CHECK(g1.mig.reconfigurable());
  CHECK(g1.used.mig_instance_used.empty());
  CHECK(r->gpus[2].uuid.empty());
  CHECK_FALSE(r->gpus[3].mig.enabled);

  Link nv = r->links.get(1, 0);
  CHECK(nv.is_nvlink());
  CHECK(nv.nvlink_count == 12);
  Link degraded = r->links.get(1, 2);
  CHECK(degraded.kind == Link::Kind::kNVLink);
  CHECK(degraded.degraded);
  CHECK_FALSE(degraded.is_nvlink());
  CHECK(r->links.get(2, 0).path == PciePath::kPIX);
  CHECK(r->links.get(0, 3).path == PciePath::kNODE);
  CHECK(r->links.get(2, 3).kind == Link::Kind::kPCIe);
  CHECK(r->links.get(2, 3).path == PciePath::kSYS);  // unlisted pair
}

TEST_CASE("topology annotation: strict validation", "[k8s][inventory]") {
  const std::string a100 = R"("model": "NVIDIA-A100-SXM4-80GB", "memoryMiB": 81920)";
  auto two_gpus = [&](const std::string& extra0, const std::string& links) {
    return R"({"version": 1, "gpus": [{"index": 0, )" + a100 + extra0 + R"(}, {"index": 1, )" +
           a100 + R"(}], "links": [)" + links + "]}";
  };
  auto with_mig = [&](const std::string& instances) {
    return two_gpus(R"(, "mig": {"enabled": true, "instances": [)" + instances + "]}", "");
  };
  struct Case {
    std::string annotation;
    const char* message;
  };
  const Case cases[] = {
      {"{", "not valid JSON"},
      {"[]", "must be a JSON object"},
      {R"({"gpus": []})", "version: must be 1, got nothing"},
      {R"({"version": 2, "gpus": []})", "version: must be 1, got 2"},
      {R"({"version": "1", "gpus": []})", "version: must be 1, got \"1\""},
      {R"({"version": 1})", "gpus: must be a list"},
      {R"({"version": 1, "gpus": [1]})", "gpus[0]: must be an object"},
      {R"({"version": 1, "gpus": [{"model": "T4", "memoryMiB": 1}]})", "gpus[0].index: missing"},
      {R"({"version": 1, "gpus": [{"index": 0, )" + a100 + R"(}, {"index": 0, )" + a100 + "}]}",
       "gpus[1].index: 0 listed twice"},
      {R"({"version": 1, "gpus": [{"index": 5, )" + a100 + "}]}",
       "gpus[0].index: must be 0..0, got 5"},
      {R"({"version": 1, "gpus": [{"index": 0, "model": "T4", "memoryMiB": 0}]})",
       "gpus[0].memoryMiB: must be a positive integer, got 0"},
      {R"({"version": 1, "gpus": [{"index": 0, "model": "T4", "memoryMiB": "16GB"}]})",
       "gpus[0].memoryMiB: must be a positive integer, got \"16GB\""},
      {R"({"version": 1, "gpus": [{"index": 0, "model": "T4", "memoryMiB": 15360.5}]})",
       "gpus[0].memoryMiB: must be a positive integer, got 15360.5"},
      {R"({"version": 1, "gpus": [{"index": 0, "memoryMiB": 1}]})",
       "gpus[0].model: must be a non-empty string"},
      {R"({"version": 1, "gpus": [{"index": 0, "model": "T4", "memoryMiB": 1, "uuid": 7}]})",
       "gpus[0].uuid: must be a string"},
      {two_gpus(R"(, "numa": "zero")", ""), "gpus[0].numa: must be an integer >= -1, got \"zero\""},
      {two_gpus(R"(, "healthy": "yes")", ""),
       "gpus[0].healthy: must be true or false, got \"yes\""},
      {R"({"version": 1, "gpus": [{"index": 0, "model": "Tesla-T4", "memoryMiB": 15360,
           "mig": {"enabled": true}}]})",
       "gpus[0].mig.enabled: Tesla-T4 does not support MIG"},
      {two_gpus(R"(, "mig": {"instances": [{"profile": "7g.80gb", "start": 0}]})", ""),
       "gpus[0].mig.instances: listed but mig.enabled is not true"},
      {with_mig(R"({"profile": "3g.20gb", "start": 0})"),
       "gpus[0].mig.instances[0].profile: \"3g.20gb\" is not a MIG profile of "
       "NVIDIA-A100-SXM4-80GB"},
      {with_mig(R"({"profile": "3g.40gb", "start": 2})"),
       "gpus[0].mig.instances[0].start: 3g.40gb may start at 0, 4, got 2"},
      {with_mig(R"({"profile": "3g.40gb"})"), "gpus[0].mig.instances[0].start: missing"},
      {with_mig(R"({"profile": "3g.40gb", "start": 0}, {"profile": "2g.20gb", "start": 2})"),
       "gpus[0].mig.instances[1]: overlaps another instance"},
      {with_mig(R"({"profile": "1g.10gb+me", "start": 0}, {"profile": "1g.10gb+me", "start": 1})"),
       "gpus[0].mig.instances[1]: only one media-extension (+me) instance fits on a GPU"},
      {two_gpus("", R"({"a": 0, "b": 0, "type": "NVLink", "count": 1})"),
       "links[0]: links GPU 0 to itself"},
      {two_gpus("", R"({"a": 0, "b": 2, "type": "NVLink", "count": 1})"),
       "links[0].b: must be a GPU index 0..1, got 2"},
      {two_gpus("", R"({"a": -1, "b": 1, "type": "NVLink", "count": 1})"),
       "links[0].a: must be a GPU index 0..1, got -1"},
      {two_gpus("", R"({"a": 0, "b": 1, "type": "NVLink", "count": 1},
                       {"a": 1, "b": 0, "type": "PCIe", "path": "SYS"})"),
       "links[1]: pair (0,1) listed twice"},
      {two_gpus("", R"({"a": 0, "b": 1, "type": "nvlink", "count": 1})"),
       "links[0].type: must be \"NVLink\" or \"PCIe\", got \"nvlink\""},
      {two_gpus("", R"({"a": 0, "b": 1})"),
       "links[0].type: must be \"NVLink\" or \"PCIe\", got nothing"},
      {two_gpus("", R"({"a": 0, "b": 1, "type": "NVLink"})"), "links[0].count: missing"},
      {two_gpus("", R"({"a": 0, "b": 1, "type": "NVLink", "count": 0})"),
       "links[0].count: must be an integer >= 1, got 0"},
      {two_gpus("", R"({"a": 0, "b": 1, "type": "PCIe", "path": "QPI"})"),
       "links[0].path: must be PIX, PXB, PHB, NODE or SYS, got \"QPI\""},
      {two_gpus("", R"({"a": 0, "b": 1, "type": "PCIe", "path": "SYS", "degraded": "no"})"),
       "links[0].degraded: must be true or false, got \"no\""},
      {R"({"version": 1, "gpus": [], "links": {}})", "links: must be a list"},
  };
  for (const Case& c : cases) {
    INFO(c.annotation);
    auto r = node_from_topology_annotation("n1", c.annotation);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error() == std::string("node n1: gapless.io/gpu-topology: ") + c.message);
  }
}

// The model's GPU sets are 64-bit masks: a 65th GPU used to reach shifts past bit 63 in
// LinkGraph::set and placement (found by fuzz/topology_fuzz.cpp and node_fuzz.cpp).
TEST_CASE("nodes hold at most 64 GPUs", "[k8s][inventory]") {
  auto topology = [](int gpus) {
    json doc = {{"version", 1}, {"gpus", json::array()}};
    for (int i = 0; i < gpus; ++i) {
      doc["gpus"].push_back({{"index", i}, {"model", "Tesla-T4"}, {"memoryMiB", 15360}});
    }
    doc["links"] = json::array({{{"a", gpus - 1}, {"b", 0}, {"type", "NVLink"}, {"count", 2}}});
    return doc.dump();
  };
  auto ok = node_from_topology_annotation("n1", topology(64));
  REQUIRE(ok.ok());
  CHECK(ok->links.nvlink_mask(63) == 1);
  auto big = node_from_topology_annotation("n1", topology(65));
  REQUIRE_FALSE(big.ok());
  CHECK(big.error() == "node n1: gapless.io/gpu-topology: gpus: 65 GPUs is more than 64");

  auto gfd = [](const char* count) {
    return json{{"metadata", {{"name", "n1"}}},
                {"status", {{"allocatable", {{"nvidia.com/gpu", count}}}}}};
  };
  auto gfd64 = node_from_json(gfd("64"));
  REQUIRE(gfd64.ok());
  CHECK(gfd64->gpus.size() == 64);
  auto gfd65 = node_from_json(gfd("65"));
  REQUIRE_FALSE(gfd65.ok());
  CHECK(gfd65.error() == "node n1: nvidia.com/gpu: 65 GPUs is more than 64");
}

TEST_CASE("topology annotation: nesting beyond 512 levels is refused before parsing",
          "[k8s][inventory]") {
  const std::string deep = R"({"version": )" + std::string(600, '[') + std::string(600, ']') + "}";
  auto r = node_from_topology_annotation("n1", deep);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error() == "node n1: gapless.io/gpu-topology: nested deeper than 512 levels");
}

TEST_CASE("topology annotation: an empty GPU list is a node without GPUs", "[k8s][inventory]") {
  auto r = node_from_topology_annotation("n1", R"({"version": 1, "gpus": []})");
  REQUIRE(r.ok());
  CHECK(r->gpus.empty());
  CHECK(r->links.size() == 0);
}

// Another node's agent may write this node's annotation where tokens do not name the node
// (docs/security.md): the kubelet's capacity, which only this node's kubelet writes, bounds it.
TEST_CASE("topology annotation: more whole GPUs than the kubelet's capacity is not trusted",
          "[k8s][inventory]") {
  json n = bare_node("a100-x");
  n["metadata"]["annotations"] = {{"gapless.io/gpu-topology", kGoodTopology}};
  // kGoodTopology: 4 GPUs, 2 of them MIG-enabled, whose instances the plugin lists instead.
  SECTION("capacity lists the two whole GPUs, allocatable only the healthy one") {
    n["status"]["capacity"] = {{"nvidia.com/gpu", "2"}};
    n["status"]["allocatable"] = {{"nvidia.com/gpu", "1"}};
    auto r = node_from_json(n);
    REQUIRE(r.ok());
    CHECK(r->gpus.size() == 4);
  }
  SECTION("no nvidia.com/gpu in capacity: nothing to compare") {
    n["status"]["capacity"] = {{"cpu", "8"}};
    CHECK(node_from_json(n).ok());
  }
  SECTION("fewer in capacity than the annotation claims") {
    n["status"]["capacity"] = {{"nvidia.com/gpu", "1"}};
    auto r = node_from_json(n);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error() ==
          "node a100-x: gapless.io/gpu-topology lists 2 GPUs outside MIG mode, but the node's "
          "kubelet reports status.capacity nvidia.com/gpu 1: not trusting the annotation (was it "
          "written by another node's agent?)");
  }
  SECTION("a node whose kubelet lists no GPU at all") {
    n["status"]["capacity"] = {{"nvidia.com/gpu", "0"}};
    CHECK_FALSE(node_from_json(n).ok());
  }
}

TEST_CASE(
    "Gapless's device plugin allocates where the agent says it registered and the kubelet "
    "offers its devices",
    "[k8s][inventory]") {
  json node = bare_node("n1");
  node["metadata"]["annotations"]["gapless.io/gpu-topology"] = kGoodTopology;
  node["status"]["allocatable"] = {{"nvidia.com/gpu", "2"}, {"nvidia.com/mig-1g.10gb", "7"}};
  auto plugin = [&] {
    auto n = node_from_json(node);
    REQUIRE(n.ok());
    CHECK(n->gapless_device_plugin == gapless::k8s::gapless_plugin_allocates(node));
    return n->gapless_device_plugin;
  };
  // The topology annotation alone says nothing about who allocates (NVIDIA's plugin, here).
  CHECK_FALSE(plugin());
  auto& listed = node["metadata"]["annotations"]["gapless.io/device-plugin"];
  listed = "nvidia.com/gpu,gapless.io/gpu-shared-count";
  CHECK(plugin());
  listed = " gapless.io/gpu-shared-count , nvidia.com/mig-1g.10gb";  // any listed one offered
  CHECK(plugin());
  listed = "gapless.io/gpu-shared-count";  // listed, but the kubelet offers none of it
  CHECK_FALSE(plugin());
  listed = "nvidia.com/gpu";
  node["status"]["allocatable"]["nvidia.com/gpu"] = "0";  // the plugin disconnected
  CHECK_FALSE(plugin());
  node["status"]["allocatable"]["nvidia.com/gpu"] = "many";  // unreadable: not offered
  CHECK_FALSE(plugin());
  node["status"]["allocatable"]["nvidia.com/gpu"] = 3;
  CHECK(plugin());
  listed = 42;  // not a string
  CHECK_FALSE(plugin());
  listed = "";
  CHECK_FALSE(plugin());
}

TEST_CASE("comma-separated annotation values", "[k8s]") {
  using gapless::k8s::comma_list;
  CHECK(comma_list("") == std::vector<std::string>{});
  CHECK(comma_list(" a100 ,, h100,\t") == std::vector<std::string>{"a100", "h100"});
  CHECK(comma_list("x") == std::vector<std::string>{"x"});
}
