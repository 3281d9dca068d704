// The drift tests' fakes (drift_monitor_test.cpp, drift_extender_test.cpp): the kubelet's
// PodResources service on a Unix socket in a temp dir, and an agent on the fake NVML's DGX-1
// publishing node gpu-1 to the fake API server with the drift check on.
#pragma once

#include <grpcpp/grpcpp.h>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>

#include "fake_api_server.h"
#include "fake_nvml.h"
#include "gapless/agent/agent.h"
#include "gapless/agent/drift_monitor.h"
#include "gapless/agent/topology_annotation.h"
#include "gapless/k8s/allocation_record.h"
#include "gapless/k8s/json_fields.h"
#include "gapless/k8s/node_inventory.h"
#include "podresources/v1/api.grpc.pb.h"
#include "temp_dir.h"

namespace gapless::test::drift {

using nlohmann::json;

// The kubelet's PodResources service, answering List with what the test set.
class FakePodResources final : public v1::PodResourcesLister::Service {
 public:
  // How List shapes a container's devices of one resource. kPerDevice is the real kubelet's
  // (v1.26, containerDevicesFromResourceDeviceInstances): one ContainerDevices entry per device
  // ID. kGrouped: all IDs in one entry, as set() holds them (what other servers may answer).
  enum class Shape { kPerDevice, kGrouped };

  explicit FakePodResources(const std::string& socket, Shape shape = Shape::kPerDevice)
      : shape_(shape) {
    std::filesystem::create_directories(std::filesystem::path(socket).parent_path());
    std::filesystem::remove(socket);  // a restarted kubelet's socket is a new file
    grpc::ServerBuilder builder;
    builder.AddListeningPort("unix:" + socket, grpc::InsecureServerCredentials());
    builder.RegisterService(this);
    server_ = builder.BuildAndStart();
    REQUIRE(server_ != nullptr);
  }
  ~FakePodResources() override { server_->Shutdown(); }

  void set(std::vector<agent::AssignedPod> pods) {
    std::lock_guard lock(mu_);
    pods_ = std::move(pods);
  }

  grpc::Status List(grpc::ServerContext*, const v1::ListPodResourcesRequest*,
                    v1::ListPodResourcesResponse* out) override {
    std::lock_guard lock(mu_);
    for (const auto& p : pods_) {
      auto* pod = out->add_pod_resources();
      pod->set_namespace_(p.ns);
      pod->set_name(p.name);
      for (const auto& c : p.containers) {
        auto* container = pod->add_containers();
        container->set_name(c.name);
        for (const auto& d : c.devices) {
          if (shape_ == Shape::kGrouped || d.ids.empty()) {
            auto* devices = container->add_devices();
            devices->set_resource_name(d.resource);
            for (const auto& id : d.ids) devices->add_device_ids(id);
            continue;
          }
          for (const auto& id : d.ids) {
            auto* devices = container->add_devices();
            devices->set_resource_name(d.resource);
            devices->add_device_ids(id);
          }
        }
      }
    }
    return grpc::Status::OK;
  }

 private:
  const Shape shape_;
  std::unique_ptr<grpc::Server> server_;
  std::mutex mu_;
  std::vector<agent::AssignedPod> pods_;
};

inline std::vector<std::string> fixture_uuids() {
  std::ifstream in(nvml_fixture("dgx1-v100"));
  const json doc = json::parse(in);
  std::vector<std::string> out;
  for (const auto& g : doc.at("gpus")) out.push_back(g.at("uuid"));
  return out;
}

// Pod `name`'s record: the GPUs `index -> uuid` of gpu-1, whole.
inline model::Allocation record(const std::string& name, const std::map<int, std::string>& gpus) {
  model::Allocation a;
  a.pod_uid = "uid-" + name;
  a.pod_ns = "ml";
  a.pod_name = name;
  a.node = "gpu-1";
  for (const auto& [index, uuid] : gpus) a.gpus.push_back({index, uuid, 0, 0, 0});
  return a;
}

inline model::Allocation record(const std::string& name, int index, const std::string& uuid) {
  return record(name, std::map<int, std::string>{{index, uuid}});
}

// A whole-GPU pod in namespace ml bound to gpu-1, Running, whose container "main" asks for
// as many GPUs as its record names (`gpus`: index -> UUID; nullopt: one GPU and no record).
inline json running_pod(const std::string& name,
                        const std::optional<std::map<int, std::string>>& gpus) {
  json meta = {{"name", name}, {"namespace", "ml"}, {"uid", "uid-" + name}};
  if (gpus) {
    meta["annotations"] = {{std::string(k8s::kAllocationAnnotation),
                            k8s::encode_allocation_record(record(name, *gpus))}};
  }
  const std::string count = std::to_string(gpus ? gpus->size() : 1);
  return {{"metadata", meta},
          {"spec",
           {{"nodeName", "gpu-1"},
            {"containers",
             {{{"name", "main"}, {"resources", {{"limits", {{"nvidia.com/gpu", count}}}}}}}}}},
          {"status", {{"phase", "Running"}}}};
}
// A one-GPU pod whose record names GPU `index` (`uuid`); none: no record.
inline json running_pod(const std::string& name, std::optional<int> index,
                        const std::string& uuid) {
  if (!index) return running_pod(name, std::nullopt);
  return running_pod(name, std::map<int, std::string>{{*index, uuid}});
}

// Pod `name`'s container "main" holding the GPUs `uuids` (as FakePodResources shapes them).
inline agent::AssignedPod holding(const std::string& name, std::vector<std::string> uuids) {
  return {"ml", name, {{"main", {{"nvidia.com/gpu", std::move(uuids)}}}}};
}
inline agent::AssignedPod holding(const std::string& name, const std::string& uuid) {
  return holding(name, std::vector<std::string>{uuid});
}

// An agent on the fake DGX-1 publishing node gpu-1, with the drift check on.
struct DriftRig {
  DriftRig() : client(api.client_config()), publisher(client, "gpu-1") {
    api.add_node({{"metadata", {{"name", "gpu-1"}}}});
    configure_fake_nvml(nvml_fixture("dgx1-v100"));
    agent::AgentOptions o;
    o.nvml_library = GAPLESS_FAKE_NVML;
    o.node_label = "gpu-1";
    a = std::make_unique<agent::Agent>(o, &publisher, metrics, nullptr);
    drift = std::make_unique<agent::DriftMonitor>(agent::DriftMonitorOptions{"gpu-1", socket},
                                                  client, metrics, nullptr);
    a->check_in_use([this](const agent::NodeGpus& node) {
      std::map<int, std::string> uuids;
      for (const auto& g : node.gpus) uuids[g.index] = g.uuid;
      auto fences = drift->check(uuids);
      return fences.ok() ? *fences : drift->fences();
    });
  }

  json published_gpus() const {
    auto n = api.node("gpu-1");
    REQUIRE(n);
    const json* text = k8s::field_path(*n, {"metadata", "annotations", agent::kTopologyAnnotation});
    REQUIRE(text != nullptr);
    return json::parse(text->get<std::string>()).at("gpus");
  }

  std::vector<json> drift_events() const {
    std::vector<json> out;
    for (const json& e : api.events()) {
      if (e.value("reason", "") == agent::kDriftEventReason) out.push_back(e);
    }
    return out;
  }

  // The node as the extender reads it from the API server (node_inventory.h).
  model::Node extender_node() const {
    auto n = api.node("gpu-1");
    REQUIRE(n);
    auto node = k8s::node_from_json(*n);
    INFO((node.ok() ? "" : node.error()));
    REQUIRE(node.ok());
    return std::move(node).value();
  }

  bool metric_has(const std::string& line) const {
    return metrics.serialize().find(line + "\n") != std::string::npos;  // the whole sample
  }

  TempDir dir;
  std::string socket = (dir.path() / "pod-resources" / "kubelet.sock").string();
  FakeApiServer api;
  k8s::ApiClient client;
  agent::NodePublisher publisher;
  agent::AgentMetrics metrics;
  std::unique_ptr<agent::Agent> a;
  std::unique_ptr<agent::DriftMonitor> drift;
};

}  // namespace gapless::test::drift
