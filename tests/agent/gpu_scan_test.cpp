// Discovery through the fake NVML: the annotation the agent builds for each fixture machine
// parses (k8s::node_from_topology_annotation) into the node the matching topology fixture
// describes, GPU by GPU and pair by pair; MIG layouts on the DGX A100 machine; bad libraries.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "fake_nvml.h"
#include "gapless/agent/gpu_scan.h"
#include "gapless/agent/topology_annotation.h"
#include "temp_dir.h"

namespace {

using namespace gapless;

std::string annotation_of(const std::string& fixture) {
  auto lib = test::open_fake_nvml(fixture);
  agent::GpuScanner scanner(*lib, nullptr);
  auto gpus = scanner.scan();
  REQUIRE(gpus.ok());
  return agent::topology_annotation(*gpus);
}

}  // namespace

TEST_CASE("the annotation of each fixture machine is its topology fixture") {
  const std::string fixture =
      GENERATE(as<std::string>{}, "dgx1-v100", "dgx-a100", "hgx-h100", "l4-8", "t4-4");
  INFO(fixture);
  const model::Node got = test::parse_annotation("n", annotation_of(fixture));
  const model::Node want = test::parse_annotation("n", test::topology_fixture_text(fixture));
  REQUIRE(got.gpus.size() == want.gpus.size());
  for (std::size_t i = 0; i < got.gpus.size(); ++i) {
    INFO("GPU " << i);
    CHECK(got.gpus[i].index == want.gpus[i].index);
    CHECK(got.gpus[i].uuid == want.gpus[i].uuid);
    CHECK(got.gpus[i].model == want.gpus[i].model);
    CHECK(got.gpus[i].memory_mib == want.gpus[i].memory_mib);
    CHECK(got.gpus[i].numa == want.gpus[i].numa);
    CHECK(got.gpus[i].healthy);
  }
  const int n = static_cast<int>(got.gpus.size());
  for (int a = 0; a < n; ++a) {
    for (int b = a + 1; b < n; ++b) {
      INFO("pair " << a << "-" << b);
      const model::Link g = got.links.get(a, b), w = want.links.get(a, b);
      CHECK(g.is_nvlink() == w.is_nvlink());
      CHECK(g.nvlink_count == w.nvlink_count);
      if (!w.is_nvlink()) CHECK(g.path == w.path);
      CHECK_FALSE(g.degraded);
    }
  }
}

TEST_CASE("the DGX-1 annotation spells GPUs and links in the contract's words") {
  const nlohmann::json doc = nlohmann::json::parse(annotation_of("dgx1-v100"));
  CHECK(doc["version"] == 1);
  const nlohmann::json& g0 = doc["gpus"][0];
  CHECK(g0["index"] == 0);
  CHECK(g0["uuid"] == "GPU-3d825fe3-ff22-4caf-d9c3-4650a2460886");
  CHECK(g0["model"] == "Tesla-V100-SXM2-32GB");  // NVML says "Tesla V100-SXM2-32GB"
  CHECK(g0["memoryMiB"] == 32768);
  CHECK(g0["numa"] == 0);
  CHECK(g0["healthy"] == true);
  CHECK_FALSE(g0.contains("mig"));  // V100 has no MIG
  const nlohmann::json nv2 = {{"a", 0}, {"b", 3}, {"type", "NVLink"}, {"count", 2}};
  const nlohmann::json nv1 = {{"a", 0}, {"b", 1}, {"type", "NVLink"}, {"count", 1}};
  CHECK(std::count(doc["links"].begin(), doc["links"].end(), nv2) == 1);
  CHECK(std::count(doc["links"].begin(), doc["links"].end(), nv1) == 1);
  // 16 NVLink pairs; the 12 SYS pairs are left out, as the contract allows.
  CHECK(doc["links"].size() == 16);
}

TEST_CASE("MIG mode and existing instances on the DGX A100 machine") {
  const std::string text = annotation_of("dgx-a100");
  const model::Node node = test::parse_annotation("n", text);
  const auto& static_gpu = node.gpus[6].mig;
  CHECK(static_gpu.enabled);
  REQUIRE(static_gpu.instances.size() == 3);
  CHECK(static_gpu.instances[0].profile == "3g.40gb");
  CHECK(static_gpu.instances[0].start == 0);
  CHECK(static_gpu.instances[1].profile == "2g.20gb");
  CHECK(static_gpu.instances[1].start == 4);
  CHECK(static_gpu.instances[2].profile == "1g.10gb");
  CHECK(static_gpu.instances[2].start == 6);
  CHECK(node.gpus[7].mig.reconfigurable());
  CHECK_FALSE(node.gpus[0].mig.enabled);
  const nlohmann::json doc = nlohmann::json::parse(text);
  CHECK(doc["gpus"][0]["mig"] ==
        nlohmann::json{{"enabled", false}, {"instances", nlohmann::json::array()}});
}

TEST_CASE("bus ids and model names are normalised") {
  CHECK(agent::normalise_bus_id("00000000:0A:00.0") == "0:0a:00.0");
  CHECK(agent::normalise_bus_id("0000:0a:00.0") == "0:0a:00.0");
  CHECK(agent::normalise_bus_id("0A.0") == "0a.0");  // no colon, no domain: lower-cased only
  CHECK(agent::model_name("NVIDIA H100 80GB HBM3") == "NVIDIA-H100-80GB-HBM3");
  CHECK(agent::model_name("Tesla T4 ") == "Tesla-T4");
}

TEST_CASE("a library that cannot be used is an error with the reason, never a crash") {
  test::TempDir dir;
  SECTION("missing file") {
    auto lib = agent::NvmlLibrary::open(dir.file("libnvidia-ml.so.1"));
    REQUIRE_FALSE(lib.ok());
    CHECK_THAT(lib.error(), Catch::Contains("cannot load"));
  }
  SECTION("not a shared library") {
    auto lib = agent::NvmlLibrary::open(dir.write("libnvidia-ml.so.1", "not ELF"));
    REQUIRE_FALSE(lib.ok());
    CHECK_THAT(lib.error(), Catch::Contains("cannot load"));
  }
  SECTION("malformed fake config: nvmlInit_v2 fails") {
    const std::string bad = GENERATE(as<std::string>{}, "{", "[]", R"({"gpus": [{"name": 1}]})",
                                     R"({"gpus": [], "topology": [[0, 1, 10]]})");
    test::configure_fake_nvml(dir.write("bad.json", bad));
    auto lib = agent::NvmlLibrary::open(GAPLESS_FAKE_NVML);
    REQUIRE_FALSE(lib.ok());
    CHECK_THAT(lib.error(), Catch::Contains("nvmlInit_v2 failed"));
  }
}

namespace {

// A one- or two-GPU machine written for one test.
// `gpus`: a list, or one GPU ({x} of one object is that object in nlohmann's braces).
std::string scan_machine(const test::TempDir& dir, const nlohmann::json& gpus) {
  const nlohmann::json list = gpus.is_array() ? gpus : nlohmann::json::array({gpus});
  test::configure_fake_nvml(dir.write("machine.json", nlohmann::json{{"gpus", list}}.dump()));
  auto lib = agent::NvmlLibrary::open(GAPLESS_FAKE_NVML);
  REQUIRE(lib.ok());
  std::vector<std::string> errors;
  agent::GpuScanner scanner(**lib, [&](const std::string& e) { errors.push_back(e); });
  auto scanned = scanner.scan();
  REQUIRE(scanned.ok());
  return agent::topology_annotation(*scanned);
}

nlohmann::json a100(const std::string& bus, nlohmann::json mig) {
  nlohmann::json g = {{"name", "NVIDIA A100-SXM4-80GB"},
                      {"uuid", "GPU-" + bus},
                      {"memoryMiB", 81920},
                      {"busId", bus}};
  if (!mig.is_null()) g["mig"] = std::move(mig);
  return g;
}

}  // namespace

TEST_CASE("GPUs the annotation cannot describe truthfully are published unhealthy") {
  test::TempDir dir;
  SECTION("a GPU lost before the first scan keeps its index, as an unknown, unhealthy GPU") {
    nlohmann::json lost = a100("0:20:00.0", nullptr);
    lost["lost"] = true;
    const model::Node n =
        test::parse_annotation("n", scan_machine(dir, {a100("0:10:00.0", nullptr), lost}));
    REQUIRE(n.gpus.size() == 2);
    CHECK(n.gpus[0].healthy);
    CHECK_FALSE(n.gpus[1].healthy);
    CHECK(n.gpus[1].model == "unknown");
  }
  SECTION("a MIG instance of a profile Gapless does not know") {
    // Profile 5 has 8 compute slices: no A100 profile has; leaving it out would free its slices.
    const nlohmann::json mig = {{"mode", 1},
                                {"instances", {{{"profileId", 5}, {"start", 0}, {"size", 8}}}}};
    const model::Node n = test::parse_annotation("n", scan_machine(dir, {a100("0:10:00.0", mig)}));
    CHECK_FALSE(n.gpus[0].healthy);
    CHECK(n.gpus[0].mig.enabled);
    CHECK(n.gpus[0].mig.instances.empty());
  }
  SECTION("a MIG instance at a start its profile does not allow") {
    // 3g.40gb may start at 0 or 4 only; written as is, the scheduler would reject the node.
    const nlohmann::json mig = {{"mode", 1},
                                {"instances", {{{"profileId", 2}, {"start", 2}, {"size", 4}}}}};
    const model::Node n = test::parse_annotation("n", scan_machine(dir, {a100("0:10:00.0", mig)}));
    CHECK_FALSE(n.gpus[0].healthy);
    CHECK(n.gpus[0].mig.instances.empty());
  }
  SECTION("MIG instances that cannot be read (no permission)") {
    // An empty list would mean "reconfigurable": the scheduler would place slices anywhere.
    const nlohmann::json mig = {{"mode", 1}, {"denied", true}};
    const model::Node n = test::parse_annotation("n", scan_machine(dir, {a100("0:10:00.0", mig)}));
    CHECK_FALSE(n.gpus[0].healthy);
  }
  SECTION("MIG switched on for a model Gapless knows no MIG profiles of") {
    nlohmann::json t4 = {{"name", "Tesla T4"},
                         {"uuid", "GPU-t4"},
                         {"memoryMiB", 15360},
                         {"busId", "0:10:00.0"},
                         {"mig", {{"mode", 1}}}};
    const std::string text = scan_machine(dir, {t4});
    const model::Node n = test::parse_annotation("n", text);
    CHECK_FALSE(n.gpus[0].healthy);
    CHECK_FALSE(n.gpus[0].mig.enabled);
  }
  SECTION("1g.20gb and +me profiles get their names") {
    const nlohmann::json mig = {{"mode", 1},
                                {"instances",
                                 {{{"profileId", 9}, {"start", 0}, {"size", 2}},
                                  {{"profileId", 7}, {"start", 2}, {"size", 1}}}}};
    const model::Node n = test::parse_annotation("n", scan_machine(dir, {a100("0:10:00.0", mig)}));
    CHECK(n.gpus[0].healthy);
    REQUIRE(n.gpus[0].mig.instances.size() == 2);
    CHECK(n.gpus[0].mig.instances[0].profile == "1g.20gb");
    CHECK(n.gpus[0].mig.instances[1].profile == "1g.10gb+me");
  }
}
