// Per-pod GPU usage (usage_report.h) with the fake NVML's utilization and process lists, a fake
// /proc tree in a temporary directory, and the fake API server's pod list: usage per GPU,
// attribution to pod and container, and a share over-use Event once per episode.
#include <prometheus/metric_family.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "fake_api_server.h"
#include "fake_nvml.h"
#include "gapless/agent/metrics.h"
#include "gapless/agent/usage_report.h"
#include "temp_dir.h"

namespace gapless::test {

using nlohmann::json;

namespace {

const std::string kContainerA(64, 'a');
const std::string kContainerB(64, 'b');

// A machine of two GPUs: GPU 0 busy with two processes of the share pod (one per container)
// and one outside any pod; GPU 1 idle, no utilization reported.
std::string write_config(TempDir& dir) {
  json gpu0 = {{"name", "NVIDIA A100-SXM4-80GB"},
               {"uuid", "GPU-0000aaaa"},
               {"memoryMiB", 81920},
               {"busId", "00000000:07:00.0"},
               {"utilization", {{"gpu", 87}, {"memory", 40}}}};
  gpu0["processes"] =
      json::array({json{{"pid", 4001}, {"usedMiB", 12288}}, json{{"pid", 4002}, {"usedMiB", 4096}},
                   json{{"pid", 4999}, {"usedMiB", 512}}});
  const json gpu1 = {{"name", "NVIDIA A100-SXM4-80GB"},
                     {"uuid", "GPU-0000bbbb"},
                     {"memoryMiB", 81920},
                     {"busId", "00000000:0F:00.0"}};
  const json config = {{"gpus", json::array({gpu0, gpu1})}};
  const std::string path = dir.file("nvml.json");
  std::ofstream(path) << config.dump();
  return path;
}

void write_cgroup(TempDir& dir, unsigned int pid, const std::string& text) {
  const std::filesystem::path p = std::filesystem::path(dir.path()) / "proc" / std::to_string(pid);
  std::filesystem::create_directories(p);
  std::ofstream(p / "cgroup") << text;
}

// The share pod: 20 GiB on GPU 0 in its record, containers "server" and "sidecar".
json share_pod() {
  json grant = {
      {"index", 0}, {"uuid", "GPU-0000aaaa"}, {"memoryMiB", 20480}, {"computeMilli", 300}};
  const json record = {{"v", 1}, {"node", "node-1"}, {"gpus", json::array({grant})}};
  const json containers = json::array({json{{"name", "server"}}, json{{"name", "sidecar"}}});
  const json statuses =
      json::array({json{{"name", "server"}, {"containerID", "containerd://" + kContainerA}},
                   json{{"name", "sidecar"}, {"containerID", "containerd://" + kContainerB}}});
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata",
           {{"name", "infer-0"},
            {"namespace", "serve"},
            {"uid", "0d1e2f30-1111-2222-3333-444455556666"},
            {"annotations", {{"gapless.io/allocation", record.dump()}}}}},
          {"spec", {{"nodeName", "node-1"}, {"containers", containers}}},
          {"status", {{"phase", "Running"}, {"containerStatuses", statuses}}}};
}

// GET `path` of the fake API server: the body.
std::string client_get(FakeApiServer& api, const std::string& path) {
  k8s::ClientConfig config;
  config.server = api.url();
  auto r = k8s::ApiClient(config).call("GET", path, "", "application/json");
  REQUIRE(r.ok());
  return r->body;
}

}  // namespace

TEST_CASE("usage: a process's cgroup names its pod and container, either cgroup driver") {
  auto systemd = agent::pod_of_cgroup(
      "0::/kubepods.slice/kubepods-burstable.slice/"
      "kubepods-burstable-pod0d1e2f30_1111_2222_3333_444455556666.slice/cri-containerd-" +
      kContainerA + ".scope\n");
  REQUIRE(systemd);
  CHECK(systemd->pod_uid == "0d1e2f30-1111-2222-3333-444455556666");
  CHECK(systemd->container_id == kContainerA);
  auto cgroupfs = agent::pod_of_cgroup(
      "12:memory:/kubepods/besteffort/pod0d1e2f30-1111-2222-3333-444455556666/" + kContainerB +
      "\n11:cpu:/kubepods/besteffort/pod0d1e2f30-1111-2222-3333-444455556666/" + kContainerB);
  REQUIRE(cgroupfs);
  CHECK(cgroupfs->pod_uid == "0d1e2f30-1111-2222-3333-444455556666");
  CHECK(cgroupfs->container_id == kContainerB);
  CHECK_FALSE(agent::pod_of_cgroup("0::/system.slice/sshd.service\n"));
  CHECK_FALSE(agent::pod_of_cgroup("0::/kubepods.slice/kubepods-podNOTAUID.slice/x\n"));
  CHECK_FALSE(agent::pod_of_cgroup(""));
}

TEST_CASE("usage: per GPU, per pod and container, and an over-use Event once per episode") {
  TempDir dir;
  const std::string events = dir.file("nvml-events");
  std::ofstream(events).flush();
  configure_fake_nvml(write_config(dir), events);
  auto lib = agent::NvmlLibrary::open(GAPLESS_FAKE_NVML);
  REQUIRE(lib.ok());
  const std::string uid_path = "0d1e2f30_1111_2222_3333_444455556666";
  write_cgroup(dir, 4001,
               "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + uid_path +
                   ".slice/cri-containerd-" + kContainerA + ".scope\n");
  write_cgroup(dir, 4002,
               "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + uid_path +
                   ".slice/cri-containerd-" + kContainerB + ".scope\n");
  write_cgroup(dir, 4999, "0::/system.slice/nvidia-persistenced.service\n");

  FakeApiServer api;
  api.add_pod(share_pod());
  k8s::ClientConfig config;
  config.server = api.url();
  k8s::ApiClient client(config);
  std::vector<std::string> logged;
  agent::UsageReporter usage({"node-1", dir.file("proc")}, &client,
                             [&logged](const std::string& l) { logged.push_back(l); });
  agent::AgentMetrics metrics;
  metrics.also_serve(&usage);

  // 16 GiB of a 20 GiB share: in use, not over.
  REQUIRE(usage.update(**lib).ok());
  std::string text = metrics.serialize();
  INFO(text);
  CHECK_THAT(
      text,
      Catch::Contains("gapless_agent_gpu_utilization_ratio{gpu=\"0\",uuid=\"GPU-0000aaaa\"} 0.87"));
  CHECK(text.find("gapless_agent_gpu_utilization_ratio{gpu=\"1\"") == std::string::npos);
  CHECK_THAT(text, Catch::Contains(
                       "gapless_agent_gpu_memory_used_bytes{gpu=\"0\",uuid=\"GPU-0000aaaa\"} " +
                       std::to_string(16896LL << 20)));
  CHECK_THAT(text, Catch::Contains(
                       "gapless_agent_pod_gpu_memory_used_bytes{container=\"server\",gpu=\"0\","
                       "namespace=\"serve\",pod=\"infer-0\"} " +
                       std::to_string(12288LL << 20)));
  CHECK_THAT(text, Catch::Contains(
                       "gapless_agent_pod_gpu_memory_used_bytes{container=\"sidecar\",gpu=\"0\","
                       "namespace=\"serve\",pod=\"infer-0\"} " +
                       std::to_string(4096LL << 20)));
  CHECK_THAT(text, Catch::Contains("gapless_agent_gpu_memory_unattributed_bytes{gpu=\"0\"} " +
                                   std::to_string(512LL << 20)));
  CHECK_THAT(text, Catch::Contains("gapless_agent_share_overuse_containers 0"));
  CHECK(api.events().empty());

  // The server grows to 30 GiB: 34 GiB on the 20 GiB share. One episode, one Event.
  std::ofstream(events, std::ios::app) << "proc 0 4001 30720\n";
  REQUIRE(usage.update(**lib).ok());
  REQUIRE(usage.update(**lib).ok());  // still over: the same episode
  text = metrics.serialize();
  CHECK_THAT(text, Catch::Contains("gapless_agent_share_overuse_containers 1"));
  CHECK_THAT(text, Catch::Contains("gapless_agent_share_overuse_total 1"));
  REQUIRE(api.events().size() == 1);
  const json event = api.events().front();
  CHECK(event.at("reason") == "GaplessShareOveruse");
  CHECK(event.at("type") == "Warning");
  CHECK(event.at("involvedObject").at("name") == "infer-0");
  CHECK(event.at("involvedObject").at("uid") == "0d1e2f30-1111-2222-3333-444455556666");
  CHECK_THAT(event.at("message").get<std::string>(),
             Catch::Contains("container server holds 34816 MiB on GPU 0, over the 20480 MiB"));
  // The pod is marked for the GPU map while the episode lasts.
  CHECK(api.count_requests("PATCH", "/api/v1/namespaces/serve/pods/infer-0") == 1);
  auto mark = [&api] {
    const json pods = json::parse(client_get(api, "/api/v1/namespaces/serve/pods"));
    REQUIRE(pods.at("items").size() == 1);
    const json a = pods["items"][0].at("metadata").value("annotations", json::object());
    return a.value("gapless.io/share-overuse", std::string());
  };
  CHECK(mark() == R"([{"gpu":0,"limitMiB":20480,"usedMiB":34816}])");

  // Back under: the episode ends (the mark is removed); going over again is a new one.
  std::ofstream(events, std::ios::app) << "proc 0 4001 1024\n";
  REQUIRE(usage.update(**lib).ok());
  CHECK_THAT(metrics.serialize(), Catch::Contains("gapless_agent_share_overuse_containers 0"));
  CHECK(api.count_requests("PATCH", "/api/v1/namespaces/serve/pods/infer-0") == 2);
  CHECK(mark().empty());
  std::ofstream(events, std::ios::app) << "proc 0 4002 40000\n";
  REQUIRE(usage.update(**lib).ok());
  CHECK(api.events().size() == 2);
  CHECK_THAT(metrics.serialize(), Catch::Contains("gapless_agent_share_overuse_total 2"));
  CHECK(usage.overuse_episodes() == 2);
}

TEST_CASE("usage: without the pod list, GPUs are still reported and nothing is attributed") {
  TempDir dir;
  configure_fake_nvml(write_config(dir));
  auto lib = agent::NvmlLibrary::open(GAPLESS_FAKE_NVML);
  REQUIRE(lib.ok());
  FakeApiServer api;
  api.fail_next("GET", "/api/v1/pods", 1);
  k8s::ClientConfig config;
  config.server = api.url();
  k8s::ApiClient client(config);
  agent::UsageReporter usage({"node-1", dir.file("proc")}, &client, nullptr);
  CHECK_FALSE(usage.update(**lib).ok());
  const auto families = usage.Collect();
  REQUIRE(families.size() == 6);
  CHECK(families[0].metric.size() == 1);  // GPU 0's utilization
  CHECK(families[2].metric.empty());      // no pod
  CHECK(families[3].metric.size() == 2);  // every GPU's unattributed memory
  CHECK(families[3].metric[0].gauge.value == static_cast<double>((12288LL + 4096 + 512) << 20));
}

}  // namespace gapless::test
