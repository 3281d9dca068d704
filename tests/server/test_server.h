// Test fixture for the extender's HTTP front: a real HttpServer on 127.0.0.1, an ephemeral
// port, serving on its own thread over an Extender with an in-memory binder; plus helpers to
// build clusters, pods and request bodies, and to talk to the server with httplib::Client.
#pragma once

#include <httplib.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "gapless/k8s/cluster_file.h"
#include "gapless/model/cluster.h"
#include "gapless/placement/profile.h"
#include "gapless/server/extender.h"
#include "gapless/server/http_server.h"
#include "gapless/server/metrics.h"
#include "test_paths.h"

namespace gapless::test {

using nlohmann::json;

// A request of kube-scheduler's shape, tests/fixtures/extender/<name>.
inline std::string extender_fixture_text(const std::string& name) {
  return fixture_text("extender/" + name);
}
inline json fixture(const std::string& name) {
  return json::parse(extender_fixture_text(name));
}

inline model::Cluster demo_cluster() {
  auto r = k8s::load_cluster_file(gapless::test::source_dir() + "/examples/demo-cluster.yaml");
  if (!r) throw std::runtime_error(r.error());
  return std::move(r->cluster);
}

// A cluster from Node objects (a NodeList is built around them).
inline model::Cluster cluster_of(const json& node_items) {
  json list = {{"apiVersion", "v1"}, {"kind", "NodeList"}, {"items", node_items}};
  auto r = k8s::parse_cluster_file(list.dump(), "test-cluster");
  if (!r) throw std::runtime_error(r.error());
  return std::move(r->cluster);
}

// A node with `gpus` identical GPUs known from GPU Feature Discovery labels only.
inline json gfd_node(const std::string& name, int gpus,
                     const std::string& product = "NVIDIA-H100-80GB-HBM3") {
  const std::string n = std::to_string(gpus);
  return {{"metadata",
           {{"name", name},
            {"labels",
             {{"kubernetes.io/hostname", name},
              {"nvidia.com/gpu.product", product},
              {"nvidia.com/gpu.memory", "81559"},
              {"nvidia.com/gpu.count", n}}}}},
          {"status",
           {{"capacity", {{"nvidia.com/gpu", n}}}, {"allocatable", {{"nvidia.com/gpu", n}}}}}};
}

inline std::vector<std::string> node_names(const model::Cluster& c) {
  std::vector<std::string> out;
  for (const model::Node* n : c.nodes()) out.push_back(n->name);
  return out;
}

// A pending pod whose one container has these resource limits.
inline json pod(const std::string& name, const std::string& uid, const json& limits,
                const json& annotations = nullptr, const std::string& ns = "default") {
  json meta = {{"name", name}, {"namespace", ns}, {"uid", uid}};
  if (!annotations.is_null()) meta["annotations"] = annotations;
  json container = {{"name", "main"}, {"image", "busybox"}, {"resources", {{"limits", limits}}}};
  return {{"metadata", meta},
          {"spec", {{"containers", json::array({container})}, {"schedulerName", "gpu-scheduler"}}},
          {"status", {{"phase", "Pending"}}}};
}

inline json gpu_pod(const std::string& name, const std::string& uid, int gpus,
                    const json& annotations = nullptr) {
  return pod(name, uid, {{"nvidia.com/gpu", std::to_string(gpus)}}, annotations);
}

inline std::string extender_args(const json& pod_json, const std::vector<std::string>& nodes) {
  return json{{"Pod", pod_json}, {"Nodes", nullptr}, {"NodeNames", nodes}}.dump();
}

// The sample of `series` (name and labels exactly as /metrics writes them) in `text`, or -1
// when absent.
inline double metric_sample(const std::string& text, const std::string& series) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(series + " ", 0) == 0) return std::stod(line.substr(series.size() + 1));
  }
  return -1;
}

inline std::string bind_args(const std::string& name, const std::string& uid,
                             const std::string& node, const std::string& ns = "default") {
  return json{{"PodName", name}, {"PodNamespace", ns}, {"PodUID", uid}, {"Node", node}}.dump();
}

inline std::set<std::string> keys_of(const json& obj) {
  std::set<std::string> out;
  for (auto it = obj.begin(); it != obj.end(); ++it) out.insert(it.key());
  return out;
}

// Owns model, binder, metrics, extender and the HTTP server; serves until destruction.
class TestServer {
 public:
  explicit TestServer(model::Cluster cluster,
                      placement::Policy policy = placement::builtin_policy(),
                      server::HttpOptions options = {})
      : extender_(std::move(cluster), std::move(policy), binder_, metrics_),
        http_(extender_, std::move(options)) {
    auto bound = http_.bind("127.0.0.1", 0);
    if (!bound) throw std::runtime_error(bound.error());
    port_ = *bound;
    thread_ = std::thread([this] { http_.serve(); });
    // httplib ignores stop() until its accept loop runs, so wait for a first answer.
    for (int i = 0; i < 500; ++i) {
      auto res = client().Get("/healthz");
      if (res && res->status == 200) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    http_.stop();
    thread_.join();
    throw std::runtime_error("test server did not come up");
  }
  ~TestServer() {
    http_.stop();
    thread_.join();
  }
  TestServer(const TestServer&) = delete;
  TestServer& operator=(const TestServer&) = delete;

  int port() const { return port_; }
  server::Extender& extender() { return extender_; }
  server::InMemoryBinder& binder() { return binder_; }

  httplib::Client client() const {
    httplib::Client c("127.0.0.1", port_);
    c.set_connection_timeout(5);
    c.set_read_timeout(10);
    c.set_write_timeout(10);
    return c;
  }

  // Raw POST/GET; REQUIREs that an HTTP answer came back.
  httplib::Response post(const std::string& path, const std::string& body) const {
    auto res = client().Post(path.c_str(), body, "application/json");
    INFO("POST " << path << ": " << httplib::to_string(res.error()));
    REQUIRE(res);
    return *res;
  }
  httplib::Response get(const std::string& path) const {
    auto res = client().Get(path.c_str());
    INFO("GET " << path << ": " << httplib::to_string(res.error()));
    REQUIRE(res);
    return *res;
  }

  // An extender verb: REQUIREs HTTP 200 and a JSON body.
  json call(const std::string& verb_path, const std::string& body) const {
    httplib::Response res = post(verb_path, body);
    INFO("POST " << verb_path << " -> " << res.status << " " << res.body);
    REQUIRE(res.status == 200);
    REQUIRE(json::accept(res.body));
    return json::parse(res.body);
  }

  // /debug/state without the learned workload mix: the model. (Every pod filtered is counted in
  // the mix; that is learning, not a change of the model.)
  std::string state() const {
    httplib::Response res = get("/debug/state");
    REQUIRE(res.status == 200);
    json doc = json::parse(res.body);
    doc.erase("workload");
    return doc.dump();
  }

  // filter (nodeCache mode) then bind to `node`; returns the bind answer's Error.
  std::string filter_and_bind(const json& pod_json, const std::string& node) const {
    json f = call("/filter", extender_args(pod_json, {node}));
    REQUIRE(f.at("Error") == "");
    const json& meta = pod_json.at("metadata");
    json b = call("/bind",
                  bind_args(meta.at("name").get<std::string>(), meta.at("uid").get<std::string>(),
                            node, meta.value("namespace", "default")));
    return b.at("Error").get<std::string>();
  }

 private:
  server::Metrics metrics_;
  server::InMemoryBinder binder_;
  server::Extender extender_;
  server::HttpServer http_;
  int port_ = 0;
  std::thread thread_;
};

// Checks the ExtenderFilterResult invariants for a successful call over `input` node names:
// PascalCase keys only, Error "", reasons free of node names; when no node passed, every input
// node in exactly one of FailedNodes / FailedAndUnresolvableNodes, and when some passed, both
// maps empty (kube-scheduler reads them only for a pod it cannot place). Returns the passed
// names.
inline std::vector<std::string> check_filter_result(const json& r,
                                                    const std::vector<std::string>& input,
                                                    const std::vector<std::string>& passed) {
  INFO(r.dump());
  REQUIRE(keys_of(r) == std::set<std::string>{"Nodes", "NodeNames", "FailedNodes",
                                              "FailedAndUnresolvableNodes", "Error"});
  CHECK(r.at("Error") == "");
  REQUIRE(r.at("FailedNodes").is_object());
  REQUIRE(r.at("FailedAndUnresolvableNodes").is_object());
  std::multiset<std::string> seen(passed.begin(), passed.end());
  for (const char* map : {"FailedNodes", "FailedAndUnresolvableNodes"}) {
    for (auto it = r.at(map).begin(); it != r.at(map).end(); ++it) {
      seen.insert(it.key());
      REQUIRE(it.value().is_string());
      const std::string reason = it.value();
      CHECK_FALSE(reason.empty());
      for (const std::string& n : input) {
        INFO("reason \"" << reason << "\" names node " << n);
        CHECK(reason.find(n) == std::string::npos);
      }
    }
  }
  if (passed.empty()) {
    CHECK(seen == std::multiset<std::string>(input.begin(), input.end()));
  } else {
    CHECK(r.at("FailedNodes").empty());
    CHECK(r.at("FailedAndUnresolvableNodes").empty());
  }
  return passed;
}

}  // namespace gapless::test
