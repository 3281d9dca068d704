#include <catch2/catch.hpp>

#include "gapless/k8s/json_fields.h"
#include "gapless/k8s/pod_request.h"
#include "test_paths.h"

using gapless::k8s::parse_pod;
using gapless::model::RequestKind;
using gapless::model::TopologyWish;
using nlohmann::json;

namespace {

json container(json limits, json requests = nullptr) {
  json res = json::object();
  if (!limits.is_null()) res["limits"] = std::move(limits);
  if (!requests.is_null()) res["requests"] = std::move(requests);
  return {{"name", "c"}, {"image", "busybox"}, {"resources", std::move(res)}};
}

// `containers` and `init` are lists; a single container object is one-element list. (Written as
// pod({container(...)}), a one-element braced list is the element itself under clang's reading
// of nlohmann's initializer lists, and an array under gcc's.)
json pod(json containers, json init = nullptr, json annotations = nullptr) {
  if (containers.is_object()) containers = json::array({containers});
  if (init.is_object()) init = json::array({init});
  json p = {{"apiVersion", "v1"},
            {"kind", "Pod"},
            {"metadata", {{"name", "p"}, {"namespace", "ns"}, {"uid", "u-1"}}},
            {"spec", {{"containers", std::move(containers)}}}};
  if (!init.is_null()) p["spec"]["initContainers"] = std::move(init);
  if (!annotations.is_null()) p["metadata"]["annotations"] = std::move(annotations);
  return p;
}

json gpus(const char* n) {
  return {{"nvidia.com/gpu", n}};
}

}  // namespace

TEST_CASE("parse_pod reads the request kinds", "[k8s][pod]") {
  struct Case {
    const char* name;
    json pod;
    RequestKind kind;
    int whole = 0;
    TopologyWish topology = TopologyWish::kNone;
  };
  const json sidecar = {
      {"name", "s"}, {"restartPolicy", "Always"}, {"resources", {{"limits", gpus("1")}}}};
  const Case cases[] = {
      {"no GPU", pod({container({{"cpu", "500m"}, {"memory", "1Gi"}})}), RequestKind::kNone},
      {"one GPU", pod({container(gpus("1"))}), RequestKind::kWhole, 1},
      {"two GPUs default to nvlink-preferred", pod({container(gpus("2"))}), RequestKind::kWhole, 2,
       TopologyWish::kNvlinkPreferred},
      {"nvidia.com/gpu 0 is not asked", pod({container(gpus("0"))}), RequestKind::kNone},
      {"requests only", pod({container(nullptr, gpus("1"))}), RequestKind::kWhole, 1},
      {"limits win over requests", pod({container(gpus("2"), gpus("1"))}), RequestKind::kWhole, 2,
       TopologyWish::kNvlinkPreferred},
      {"containers add up", pod({container(gpus("1")), container(gpus("2"))}), RequestKind::kWhole,
       3, TopologyWish::kNvlinkPreferred},
      {"init 4 beats containers 1+1",
       pod({container(gpus("1")), container(gpus("1"))}, {container(gpus("4"))}),
       RequestKind::kWhole, 4, TopologyWish::kNvlinkPreferred},
      {"containers 3+2 beat init 4",
       pod({container(gpus("3")), container(gpus("2"))}, {container(gpus("4"))}),
       RequestKind::kWhole, 5, TopologyWish::kNvlinkPreferred},
      {"sidecar adds to containers and later inits",
       pod({container(gpus("1"))}, {sidecar, container(gpus("4"))}), RequestKind::kWhole, 5,
       TopologyWish::kNvlinkPreferred},
      {"YAML integers", pod({container({{"nvidia.com/gpu", 2}})}), RequestKind::kWhole, 2,
       TopologyWish::kNvlinkPreferred},
      {"other vendors' resources are ignored",
       pod({container({{"example.com/gpu-mem", "lots"}, {"cpu", "1"}})}), RequestKind::kNone},
      {"a MIG resource at 0 is not asked",
       pod({container({{"nvidia.com/gpu", "1"}, {"nvidia.com/mig-1g.10gb", "0"}})}),
       RequestKind::kWhole, 1},
      {"explicit none", pod({container(gpus("4"))}, nullptr, {{"gapless.io/topology", "none"}}),
       RequestKind::kWhole, 4, TopologyWish::kNone},
      {"explicit required",
       pod({container(gpus("1"))}, nullptr, {{"gapless.io/topology", "nvlink-required"}}),
       RequestKind::kWhole, 1, TopologyWish::kNvlinkRequired},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    auto r = parse_pod(c.pod);
    REQUIRE(r.ok());
    CHECK(r->request.kind == c.kind);
    CHECK(r->request.whole == c.whole);
    CHECK(r->request.topology == c.topology);
  }
}

TEST_CASE("parse_pod reads shared, MIG and gpushare requests", "[k8s][pod]") {
  SECTION("memory only: one shared GPU") {
    auto r = parse_pod(pod({container({{"gapless.io/gpu-memory", "8192"}})}));
    REQUIRE(r.ok());
    CHECK(r->request.kind == RequestKind::kShared);
    CHECK(r->request.shared.memory_mib == 8192);
    CHECK(r->request.shared.compute_milli == 0);
    CHECK(r->request.shared.count == 1);
    CHECK(r->request.topology == TopologyWish::kNone);
  }
  SECTION("compute on two GPUs prefers NVLink") {
    auto r = parse_pod(pod(
        {container({{"gapless.io/gpu-compute", "500"}, {"gapless.io/gpu-shared-count", "2"}})}));
    REQUIRE(r.ok());
    CHECK(r->request.kind == RequestKind::kShared);
    CHECK(r->request.shared.memory_mib == 0);
    CHECK(r->request.shared.compute_milli == 500);
    CHECK(r->request.shared.count == 2);
    CHECK(r->request.topology == TopologyWish::kNvlinkPreferred);
  }
  SECTION("MIG profile") {
    auto r = parse_pod(pod({container({{"nvidia.com/mig-1g.10gb", "2"}})}));
    REQUIRE(r.ok());
    CHECK(r->request.kind == RequestKind::kMig);
    CHECK(r->request.mig_profile == "1g.10gb");
    CHECK(r->request.mig_count == 2);
    CHECK(r->request.topology == TopologyWish::kNone);
  }
  SECTION("media-extension MIG resources name the +me profile") {
    auto r = parse_pod(pod({container({{"nvidia.com/mig-1g.10gb.me", "1"}})}));
    REQUIRE(r.ok());
    CHECK(r->request.mig_profile == "1g.10gb+me");
  }
  SECTION("gpushare") {
    auto r = parse_pod(pod({container({{"aliyun.com/gpu-mem", "3"}})}));
    REQUIRE(r.ok());
    CHECK(r->request.kind == RequestKind::kGpushare);
    CHECK(r->request.gpushare_units == 3);
  }
  SECTION("annotations") {
    auto r = parse_pod(pod({container(gpus("1"))}, nullptr,
                           {{"gapless.io/gpu-models", " NVIDIA-A100-SXM4-80GB , ,Tesla-T4,"},
                            {"gapless.io/policy", "batch"},
                            {"gapless.io/foo", "unknown annotations are not ours to judge"}}));
    REQUIRE(r.ok());
    CHECK(r->request.models == std::vector<std::string>{"NVIDIA-A100-SXM4-80GB", "Tesla-T4"});
    CHECK(r->info.policy == "batch");
  }
}

TEST_CASE("parse_pod survives missing and null fields", "[k8s][pod]") {
  const json pods[] = {
      json::object(),
      {{"spec", nullptr}},
      {{"metadata", nullptr}, {"spec", {{"containers", nullptr}}}},
      {{"spec", {{"containers", json::array()}, {"initContainers", nullptr}}}},
      {{"spec", {{"containers", {{{"name", "c"}}}}}}},
      {{"spec", {{"containers", {{{"name", "c"}, {"resources", nullptr}}}}}}},
      {{"spec", {{"containers", {{{"resources", {{"limits", nullptr}, {"requests", nullptr}}}}}}}}},
  };
  for (const json& p : pods) {
    INFO(p.dump());
    auto r = parse_pod(p);
    REQUIRE(r.ok());
    CHECK(r->request.kind == RequestKind::kNone);
    CHECK(r->info.ns == "default");
  }
}

TEST_CASE("parse_pod rejects bad pods with a sentence naming the problem", "[k8s][pod]") {
  struct Case {
    json pod;
    const char* message;
  };
  const Case cases[] = {
      {json::array(), "pod: must be a JSON object"},
      {json("pod"), "pod: must be a JSON object"},
      {pod({container(gpus("8Gi"))}), "nvidia.com/gpu: must be a whole number, got \"8Gi\""},
      {pod({container(gpus("-1"))}), "nvidia.com/gpu: must be a whole number, got \"-1\""},
      {pod({container({{"nvidia.com/gpu", -1}})}),
       "nvidia.com/gpu: must be a whole number, got \"-1\""},
      {pod({container({{"nvidia.com/gpu", 1.5}})}),
       "nvidia.com/gpu: must be a whole number, got 1.5"},
      {pod({container(nullptr, gpus("1.5"))}),
       "nvidia.com/gpu: must be a whole number, got \"1.5\""},
      {pod({container(gpus("3000000000"))}),
       "nvidia.com/gpu: must be at most 2147483647, got 3000000000"},
      {pod({container({{"gapless.io/gpu-compute", "0"}})}),
       "gapless.io/gpu-compute: must be 1..1000 (milli-GPU), got 0"},
      {pod({container({{"gapless.io/gpu-compute", "1001"}})}),
       "gapless.io/gpu-compute: must be 1..1000 (milli-GPU), got 1001"},
      {pod({container({{"gapless.io/gpu-compute", "600"}}),
            container({{"gapless.io/gpu-compute", "600"}})}),
       "gapless.io/gpu-compute: must be 1..1000 (milli-GPU), got 1200"},
      {pod({container({{"gapless.io/gpu-memory", "8Gi"}})}),
       "gapless.io/gpu-memory: must be a whole number, got \"8Gi\""},
      {pod({container({{"gapless.io/gpu-shared-count", "2"}})}),
       "gapless.io/gpu-shared-count: needs gapless.io/gpu-memory or gapless.io/gpu-compute"},
      {pod({container({{"gapless.io/gpu-memory", "1024"}, {"gapless.io/gpu-shared-count", "0"}})}),
       "gapless.io/gpu-shared-count: must be at least 1, got 0"},
      {pod({container({{"gapless.io/foo", "1"}})}),
       "unknown resource gapless.io/foo (Gapless reads gapless.io/gpu-memory, "
       "gapless.io/gpu-compute and gapless.io/gpu-shared-count)"},
      {pod({container({{"nvidia.com/mig-", "1"}})}), "unknown resource nvidia.com/mig-"},
      {pod({container({{"nvidia.com/gpu", "1"}, {"nvidia.com/mig-1g.10gb", "1"}})}),
       "pod asks for whole GPUs (nvidia.com/gpu) and a MIG profile (nvidia.com/mig-1g.10gb) "
       "together"},
      {pod({container(gpus("1")), container({{"gapless.io/gpu-memory", "1024"}})}),
       "pod asks for whole GPUs (nvidia.com/gpu) and shared GPUs (gapless.io/gpu-memory) together"},
      {pod({container({{"gapless.io/gpu-compute", "100"}, {"aliyun.com/gpu-mem", "2"}})}),
       "pod asks for shared GPUs (gapless.io/gpu-compute) and gpushare memory (aliyun.com/gpu-mem) "
       "together"},
      {pod({container({{"nvidia.com/mig-1g.10gb", "1"}, {"nvidia.com/mig-2g.20gb", "1"}})}),
       "pod asks for two MIG profiles (nvidia.com/mig-1g.10gb and nvidia.com/mig-2g.20gb); a pod "
       "may use one profile"},
      {pod({container(gpus("1"))}, nullptr, {{"gapless.io/topology", "nvlink"}}),
       "gapless.io/topology: must be nvlink-required, nvlink-preferred or none, got \"nvlink\""},
      {pod({container(gpus("1"))}, nullptr, {{"gapless.io/gpu-models", 3}}),
       "gapless.io/gpu-models: must be a string"},
      {pod({container(gpus("1"))}, nullptr, json::array()),
       "metadata.annotations: must be an object"},
      {pod("not a list"), "spec.containers: must be a list"},
      {pod({container(gpus("1"))}, "x"), "spec.initContainers: must be a list"},
      {pod({"c"}), "spec.containers[0]: must be an object"},
      {pod({container("8")}), "spec.containers[0].resources.limits: must be an object"},
      {pod({json{{"resources", 1}}}), "spec.containers[0].resources: must be an object"},
      {pod({container(gpus("1"))}, {container(nullptr, {{"nvidia.com/gpu", "x"}})}),
       "nvidia.com/gpu: must be a whole number, got \"x\""},
  };
  for (const Case& c : cases) {
    INFO(c.pod.dump());
    auto r = parse_pod(c.pod);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error() == c.message);
  }
}

TEST_CASE("parse_pod reads the pod facts of a real extender request", "[k8s][pod]") {
  json args = json::parse(gapless::test::fixture_text("extender/filter-args-full.json"));
  auto r = parse_pod(args["Pod"]);
  REQUIRE(r.ok());
  CHECK(r->info.ns == "ml-team");
  CHECK(r->info.name == "llm-train-0");
  CHECK(r->info.uid == "5d0c6f5e-3b0e-4c61-9f7e-2a8f3c1b7d42");
  CHECK(r->info.priority_class == "training-high");
  CHECK(r->info.labels.at("job-name") == "llm-train");
  CHECK(r->info.node.empty());
  CHECK(r->info.policy.empty());
  CHECK(r->request.kind == RequestKind::kWhole);
  CHECK(r->request.whole == 2);
  CHECK(r->request.topology == TopologyWish::kNvlinkPreferred);
  CHECK(r->request.models.empty());

  args["Pod"]["spec"]["nodeName"] = "gpu-h100-01";
  CHECK(parse_pod(args["Pod"])->info.node == "gpu-h100-01");
}

TEST_CASE("parse_pod reads spec.priority, 0 when absent", "[k8s][pod][preemption]") {
  json p = pod({container(gpus("1"))});
  CHECK(parse_pod(p)->info.priority == 0);
  for (const std::int64_t prio : {std::int64_t{100000}, std::int64_t{-5}, std::int64_t{2000001000},
                                  std::int64_t{INT32_MIN}}) {
    p["spec"]["priority"] = prio;
    CHECK(parse_pod(p)->info.priority == prio);
  }
  p["spec"]["priority"] = nullptr;
  CHECK(parse_pod(p)->info.priority == 0);
  for (const json& bad : {json("high"), json(1.5), json(std::int64_t{1} << 31)}) {
    p["spec"]["priority"] = bad;
    auto r = parse_pod(p);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error() == "spec.priority: must be a 32-bit integer, got " + bad.dump());
  }
}

TEST_CASE("parse_pod reads status.startTime as Unix seconds, -1 when absent or malformed",
          "[k8s][pod][consolidation]") {
  json p = pod({container(gpus("1"))});
  CHECK(parse_pod(p)->info.started_unix_s == -1);
  p["status"]["startTime"] = "2026-11-27T10:00:00Z";
  CHECK(parse_pod(p)->info.started_unix_s == 1795773600);
  p["status"]["startTime"] = "1970-01-01T00:01:40.123456Z";  // a MicroTime's fraction dropped
  CHECK(parse_pod(p)->info.started_unix_s == 100);
  for (const json& bad : {json("2026-11-27T10:00:00"), json("2026-11-27T10:00:00+01:00"),
                          json("2026-11-27 10:00:00Z"), json("2026-11-27T10:00:00.Z"),
                          json("yesterday"), json(""), json(1795773600), json(nullptr)}) {
    p["status"]["startTime"] = bad;
    INFO(bad.dump());
    REQUIRE(parse_pod(p).ok());  // a bad status never refuses the pod
    CHECK(parse_pod(p)->info.started_unix_s == -1);
  }
  p["status"] = "Running";
  REQUIRE(parse_pod(p).ok());
  CHECK(parse_pod(p)->info.started_unix_s == -1);
}
