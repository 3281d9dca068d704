// What the device plugin tests share (device_plugin_test.cpp, device_plugin_mig_test.cpp): the
// fakes a plugin talks to (its directory, the API server, the kubelet), options that point a
// plugin at them, starting it, and pods bound to its node "gpu-1" in namespace "ml".
#pragma once

#include <catch2/catch.hpp>

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>

#include "eventually.h"
#include "fake_api_server.h"
#include "fake_kubelet.h"
#include "gapless/agent/device_plugin.h"
#include "gapless/k8s/allocation_record.h"
#include "temp_dir.h"

namespace gapless::test {

struct PluginFakes {
  // A plugin of `resource` on node gpu-1 against these fakes, rechecking every 20 ms.
  agent::DevicePluginOptions options(const std::string& resource) const {
    agent::DevicePluginOptions o;
    o.plugin_dir = dir.path().string();
    o.node_name = "gpu-1";
    o.resource = resource;
    o.recheck = std::chrono::milliseconds(20);
    return o;
  }
  // Starts `plugin`; returns once the kubelet saw it register and lists `devices` devices of
  // `resource`.
  void start(agent::DevicePlugin& plugin, const std::string& resource, std::size_t devices) {
    const int before = kubelet.registrations();
    REQUIRE(plugin.start().ok());
    REQUIRE(eventually([&] { return kubelet.registrations() > before; }));
    REQUIRE(eventually([&] { return kubelet.devices(resource).size() == devices; }));
  }

  TempDir dir;
  FakeApiServer api;
  k8s::ApiClient client{api.client_config()};
  FakeKubelet kubelet{dir.path().string()};
};

// The allocation record of pod `name` (namespace ml) on gpu-1, granting nothing yet.
inline model::Allocation record_of(const std::string& name) {
  model::Allocation a;
  a.pod_uid = "uid-" + name;
  a.pod_ns = "ml";
  a.pod_name = name;
  a.node = "gpu-1";
  return a;
}

// Pod `name` bound to gpu-1 at `bound` (the PodScheduled time) with `containers`, annotated
// with `record` unless that is null.
inline nlohmann::json bound_pod(const std::string& name, const std::string& bound,
                                nlohmann::json containers, const model::Allocation* record) {
  nlohmann::json meta = {{"name", name},
                         {"namespace", "ml"},
                         {"uid", "uid-" + name},
                         {"creationTimestamp", "2026-11-23T10:00:00Z"}};
  if (record != nullptr) {
    meta["annotations"] = {
        {std::string(k8s::kAllocationAnnotation), k8s::encode_allocation_record(*record)}};
  }
  return {{"metadata", meta},
          {"spec", {{"nodeName", "gpu-1"}, {"containers", std::move(containers)}}},
          {"status",
           {{"phase", "Pending"},
            {"conditions",
             {{{"type", "PodScheduled"}, {"status", "True"}, {"lastTransitionTime", bound}}}}}}};
}

// The NVIDIA_VISIBLE_DEVICES the kubelet would give the container; "" when not set.
inline std::string visible(const FakeKubelet::Admitted& a) {
  auto it = a.env.find("NVIDIA_VISIBLE_DEVICES");
  return it == a.env.end() ? "" : it->second;
}

}  // namespace gapless::test
