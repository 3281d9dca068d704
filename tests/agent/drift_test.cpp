// The drift comparison (agent/drift.h) on hand-made pod lists and PodResources answers: every
// kind of drift, shares and MIG device IDs, init containers, finished and deleted pods.
#include "gapless/agent/drift.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "gapless/k8s/allocation_record.h"

namespace {

using namespace gapless;
using agent::AssignedPod;
using agent::DriftKind;
using nlohmann::json;

const std::string kA = "GPU-aaaa", kB = "GPU-bbbb", kC = "GPU-cccc", kD = "GPU-dddd";
const std::map<int, std::string> kUuids = {{0, kA}, {1, kB}, {2, kC}, {3, kD}};

model::Allocation record(const std::string& name, std::vector<model::GpuGrant> gpus,
                         std::vector<model::MigGrant> mig = {}) {
  model::Allocation a;
  a.pod_uid = "uid-" + name;
  a.pod_ns = "ml";
  a.pod_name = name;
  a.node = "gpu-1";
  a.gpus = std::move(gpus);
  a.mig = std::move(mig);
  return a;
}

model::GpuGrant whole(int index, const std::string& uuid) {
  return {index, uuid, 0, 0, 0};
}
model::GpuGrant share(int index, const std::string& uuid) {
  return {index, uuid, 20480, 250, 0};
}

json container(const std::string& name, const std::string& resource, int count) {
  return {{"name", name}, {"resources", {{"limits", {{resource, std::to_string(count)}}}}}};
}

// std::vector, not json: `json x = {one_json}` is a one-element array under gcc but a copy of the
// element under clang (CWG 1467), which left every one-container pod without containers.
json pod(const std::string& name, std::vector<json> containers, const model::Allocation* rec,
         const std::string& phase = "Running", json init = json::array()) {
  json meta = {{"name", name}, {"namespace", "ml"}, {"uid", "uid-" + name}};
  if (rec != nullptr) {
    meta["annotations"] = {
        {std::string(k8s::kAllocationAnnotation), k8s::encode_allocation_record(*rec)}};
  }
  json spec = {{"nodeName", "gpu-1"}, {"containers", std::move(containers)}};
  if (!init.empty()) spec["initContainers"] = std::move(init);
  return {{"metadata", meta}, {"spec", spec}, {"status", {{"phase", phase}}}};
}

AssignedPod assigned(const std::string& name, const std::string& container,
                     const std::string& resource, std::vector<std::string> ids) {
  return {"ml", name, {{container, {{resource, std::move(ids)}}}}};
}

// The real kubelet's shape (v1.26 PodResources List, containerDevicesFromResourceDeviceInstances):
// one ContainerDevices entry per device, each with one ID, repeated per NUMA node of the device.
AssignedPod per_device(const std::string& name, const std::string& container,
                       const std::string& resource, const std::vector<std::string>& ids) {
  agent::AssignedContainer c{container, {}};
  for (const auto& id : ids) c.devices.push_back({resource, {id}});
  return {"ml", name, {c}};
}

agent::DriftReport check(std::vector<json> pods, const std::vector<AssignedPod>& kubelet) {
  return agent::find_drift(json{{"items", std::move(pods)}}, "gpu-1", kubelet, kUuids);
}

std::vector<DriftKind> kinds(const agent::DriftReport& r) {
  std::vector<DriftKind> out;
  for (const auto& f : r.findings) out.push_back(f.kind);
  return out;
}

TEST_CASE("drift: containers holding their record's GPUs are no drift", "[drift]") {
  const auto ra = record("a", {whole(0, kA)});
  const auto rb = record("b", {whole(1, kB), whole(2, kC)});
  const auto r = check({pod("a", {container("main", "nvidia.com/gpu", 1)}, &ra),
                        pod("b", {container("main", "nvidia.com/gpu", 2)}, &rb)},
                       {assigned("a", "main", "nvidia.com/gpu", {kA}),
                        assigned("b", "main", "nvidia.com/gpu", {kC, kB})});  // any order
  CHECK(r.findings.empty());
  CHECK(r.fenced.empty());
}

TEST_CASE("drift: the kubelet's one entry per device compares as the container's set", "[drift]") {
  const std::string gpu = "nvidia.com/gpu";
  SECTION("2 and 4 whole GPUs: no drift (issue 37: one false alarm per entry)") {
    const auto r2 = record("two", {whole(0, kA), whole(1, kB)});
    const auto r4 = record("four", {whole(0, kA), whole(1, kB), whole(2, kC), whole(3, kD)});
    auto r = check({pod("two", {container("main", gpu, 2)}, &r2)},
                   {per_device("two", "main", gpu, {kB, kA})});
    CHECK(r.findings.empty());
    CHECK(r.fenced.empty());
    r = check({pod("four", {container("main", gpu, 4)}, &r4)},
              {per_device("four", "main", gpu, {kC, kA, kD, kB})});
    CHECK(r.findings.empty());
    CHECK(r.fenced.empty());
  }
  SECTION("mixed: a grouped entry, single ones and a device listed once per NUMA node") {
    const auto r3 = record("three", {whole(0, kA), whole(1, kB), whole(2, kC)});
    AssignedPod p{"ml", "three", {{"main", {{gpu, {kA, kB}}, {gpu, {kC}}, {gpu, {kC}}}}}};
    const auto r = check({pod("three", {container("main", gpu, 3)}, &r3)}, {p});
    CHECK(r.findings.empty());
  }
  SECTION("two shares, one entry each: no drift") {
    const std::string res = "gapless.io/gpu-shared-count";
    const auto rs = record("s", {share(0, kA), share(1, kB)});
    const auto r = check({pod("s", {container("m", res, 2)}, &rs)},
                         {per_device("s", "m", res, {kB + "::5", kA + "::0"})});
    CHECK(r.findings.empty());
    CHECK(r.fenced.empty());
  }
  SECTION("two MIG instances, one entry each: no drift") {
    const std::string res = "nvidia.com/mig-1g.10gb";
    const auto rm = record("m", {}, {{1, "1g.10gb", 3}, {1, "1g.10gb", 4}});
    const auto r = check({pod("m", {container("m", res, 2)}, &rm)},
                         {per_device("m", "m", res, {kB + "::slice-4", kB + "::slice-3"})});
    CHECK(r.findings.empty());
    CHECK(r.fenced.empty());
  }
  SECTION("one wrong GPU among two: one finding naming both devices, the wrong one fenced") {
    const auto r2 = record("two", {whole(0, kA), whole(1, kB)});
    const auto r = check({pod("two", {container("main", gpu, 2)}, &r2)},
                         {per_device("two", "main", gpu, {kA, kC})});
    REQUIRE(kinds(r) == std::vector{DriftKind::kMismatch});
    CHECK(r.findings[0].devices == std::vector<std::string>{kA, kC});
    CHECK(r.findings[0].record == std::vector<std::string>{kA, kB});
    CHECK(r.fenced == std::map<std::string, std::vector<std::string>>{{kC, {"ml/two/main"}}});
  }
  SECTION("two containers, each its own entries: compared per container") {
    const auto rec = record("a", {whole(0, kA), whole(1, kB), whole(2, kC), whole(3, kD)});
    AssignedPod p{
        "ml", "a", {{"one", {{gpu, {kB}}, {gpu, {kA}}}}, {"two", {{gpu, {kD}}, {gpu, {kC}}}}}};
    const std::vector<json> app = {container("one", gpu, 2), container("two", gpu, 2)};
    CHECK(check({pod("a", app, &rec)}, {p}).findings.empty());
  }
}

TEST_CASE("drift: two same-size pods that swapped GPUs are both mismatches", "[drift]") {
  const auto ra = record("a", {whole(0, kA)});
  const auto rb = record("b", {whole(1, kB)});
  const auto r = check({pod("a", {container("main", "nvidia.com/gpu", 1)}, &ra),
                        pod("b", {container("main", "nvidia.com/gpu", 1)}, &rb)},
                       {assigned("a", "main", "nvidia.com/gpu", {kB}),
                        assigned("b", "main", "nvidia.com/gpu", {kA})});
  REQUIRE(kinds(r) == std::vector{DriftKind::kMismatch, DriftKind::kMismatch});
  CHECK(r.findings[0].pod_name == "a");
  CHECK(r.findings[0].devices == std::vector<std::string>{kB});
  CHECK(r.findings[0].record == std::vector<std::string>{kA});
  CHECK(r.findings[0].message.find("holds nvidia.com/gpu devices GPU-bbbb") != std::string::npos);
  CHECK(r.findings[0].message.find("record names GPU-aaaa") != std::string::npos);
  // Each GPU is used by a container the model charges the other pod for.
  CHECK(r.fenced ==
        std::map<std::string, std::vector<std::string>>{{kA, {"ml/b/main"}}, {kB, {"ml/a/main"}}});
}

TEST_CASE("drift: a pod without a record that holds a GPU fences it", "[drift]") {
  const auto ra = record("a", {whole(0, kA)});
  const auto r = check({pod("a", {container("main", "nvidia.com/gpu", 1)}, &ra),
                        pod("other", {container("c", "nvidia.com/gpu", 1)}, nullptr)},
                       {assigned("a", "main", "nvidia.com/gpu", {kA}),
                        assigned("other", "c", "nvidia.com/gpu", {kC})});
  REQUIRE(kinds(r) == std::vector{DriftKind::kNoRecord});
  CHECK(r.findings[0].pod_uid == "uid-other");
  CHECK(r.fenced == std::map<std::string, std::vector<std::string>>{{kC, {"ml/other/c"}}});
}

TEST_CASE("drift: a GPU held whole by one pod and used by another is double use", "[drift]") {
  const auto ra = record("a", {whole(0, kA)});
  const auto r = check({pod("a", {container("main", "nvidia.com/gpu", 1)}, &ra),
                        pod("other", {container("c", "nvidia.com/gpu", 1)}, nullptr)},
                       {assigned("a", "main", "nvidia.com/gpu", {kA}),
                        assigned("other", "c", "nvidia.com/gpu", {kA})});
  CHECK(kinds(r) ==
        std::vector{DriftKind::kDoubleUse, DriftKind::kDoubleUse, DriftKind::kNoRecord});
  CHECK(r.fenced == std::map<std::string, std::vector<std::string>>{{kA, {"ml/other/c"}}});
}

TEST_CASE("drift: shares compare by GPU, whichever slot the kubelet took", "[drift]") {
  const auto ra = record("a", {share(0, kA)});
  const auto rb = record("b", {share(0, kA)});
  const std::string res = "gapless.io/gpu-shared-count";
  SECTION("same GPU, any slots: no drift, two shares on one GPU are no double use") {
    const auto r =
        check({pod("a", {container("m", res, 1)}, &ra), pod("b", {container("m", res, 1)}, &rb)},
              {assigned("a", "m", res, {kA + "::3"}), assigned("b", "m", res, {kA + "::0"})});
    CHECK(r.findings.empty());
  }
  SECTION("a share on another GPU than its record fences that GPU") {
    const auto r =
        check({pod("a", {container("m", res, 1)}, &ra)}, {assigned("a", "m", res, {kB + "::7"})});
    REQUIRE(kinds(r) == std::vector{DriftKind::kMismatch});
    CHECK(r.findings[0].devices == std::vector<std::string>{kB + "::7"});
    CHECK(r.fenced == std::map<std::string, std::vector<std::string>>{{kB, {"ml/a/m"}}});
  }
}

TEST_CASE("drift: MIG placements compare by GPU and start slice", "[drift]") {
  // Records name MIG GPUs by index; the device IDs carry the UUID.
  const auto ra = record("a", {}, {{1, "1g.10gb", 3}});
  const std::string res = "nvidia.com/mig-1g.10gb";
  SECTION("the record's placement") {
    const auto r = check({pod("a", {container("m", res, 1)}, &ra)},
                         {assigned("a", "m", res, {kB + "::slice-3"})});
    CHECK(r.findings.empty());
  }
  SECTION("another slice of the same GPU fences the GPU") {
    const auto r = check({pod("a", {container("m", res, 1)}, &ra)},
                         {assigned("a", "m", res, {kB + "::slice-4"})});
    REQUIRE(kinds(r) == std::vector{DriftKind::kMismatch});
    CHECK(r.findings[0].record == std::vector<std::string>{kB + " slice 3"});
    CHECK(r.fenced.count(kB) == 1);
  }
  SECTION("two pods on one placement are double use") {
    const auto rb = record("b", {}, {{1, "1g.10gb", 3}});
    const auto r = check(
        {pod("a", {container("m", res, 1)}, &ra), pod("b", {container("m", res, 1)}, &rb)},
        {assigned("a", "m", res, {kB + "::slice-3"}), assigned("b", "m", res, {kB + "::slice-3"})});
    CHECK(kinds(r) == std::vector{DriftKind::kDoubleUse, DriftKind::kDoubleUse});
  }
  SECTION("a record without placement (a GFD pool) is the kubelet's choice") {
    const auto rp = record("p", {}, {{-1, "1g.10gb", -1}});
    const auto r = check({pod("p", {container("m", res, 1)}, &rp)},
                         {assigned("p", "m", res, {kC + "::slice-0"})});
    CHECK(r.findings.empty());
  }
}

TEST_CASE("drift: containers get their part of the record as the plugin splits it", "[drift]") {
  // Init container: the record's first grant; the two app containers: grants 0 and 1.
  const auto rec = record("a", {whole(0, kA), whole(1, kB)});
  const json init = json::array({container("setup", "nvidia.com/gpu", 1)});
  const std::vector<json> app = {container("one", "nvidia.com/gpu", 1),
                                 container("two", "nvidia.com/gpu", 1)};
  SECTION("in order: no drift (the init container's devices are listed too)") {
    AssignedPod p{"ml",
                  "a",
                  {{"setup", {{"nvidia.com/gpu", {kA}}}},
                   {"one", {{"nvidia.com/gpu", {kA}}}},
                   {"two", {{"nvidia.com/gpu", {kB}}}}}};
    CHECK(check({pod("a", app, &rec, "Running", init)}, {p}).findings.empty());
  }
  SECTION("the app containers swapped: both mismatch, no GPU is fenced (the pod holds both)") {
    AssignedPod p{
        "ml", "a", {{"one", {{"nvidia.com/gpu", {kB}}}}, {"two", {{"nvidia.com/gpu", {kA}}}}}};
    const auto r = check({pod("a", app, &rec, "Running", init)}, {p});
    CHECK(kinds(r) == std::vector{DriftKind::kMismatch, DriftKind::kMismatch});
    CHECK(r.fenced.empty());  // the model charges the pod for both: neither is free there
  }
}

TEST_CASE("drift: a Running pod's container that holds none of its record's GPUs is stale",
          "[drift]") {
  const auto ra = record("a", {whole(0, kA)});
  const std::vector<json> spec = {container("main", "nvidia.com/gpu", 1)};
  const AssignedPod nothing{"ml", "a", {{"main", {}}}};
  const auto r = check({pod("a", spec, &ra)}, {nothing});
  REQUIRE(kinds(r) == std::vector{DriftKind::kStale});
  CHECK(r.findings[0].record == std::vector<std::string>{kA});
  CHECK(r.fenced.empty());  // only waste: nothing to fence
  // Pending (not admitted yet): not stale.
  CHECK(check({pod("a", spec, &ra, "Pending")}, {nothing}).findings.empty());
}

TEST_CASE("drift: finished pods are skipped, pods the API does not list are fenced", "[drift]") {
  const auto r = check({pod("done", {container("c", "nvidia.com/gpu", 1)}, nullptr, "Succeeded")},
                       {assigned("done", "c", "nvidia.com/gpu", {kA}),
                        assigned("gone", "c", "nvidia.com/gpu", {kB})});
  REQUIRE(kinds(r) == std::vector{DriftKind::kUnknownPod});
  CHECK(r.fenced == std::map<std::string, std::vector<std::string>>{{kB, {"ml/gone/c"}}});
}

TEST_CASE("drift: resources the plugin does not serve are ignored", "[drift]") {
  const auto r = check({pod("x", {container("c", "example.com/fpga", 1)}, nullptr)},
                       {assigned("x", "c", "example.com/fpga", {"fpga0"})});
  CHECK(r.findings.empty());
  CHECK(agent::drift_resource("nvidia.com/mig-3g.40gb"));
  CHECK_FALSE(agent::drift_resource("example.com/fpga"));
}

}  // namespace
