// A fake kubelet for the device plugin tests: the Registration service on kubelet.sock in a
// directory, and, for every plugin that registers, a client of its DevicePlugin service that
// follows ListAndWatch and admits containers the way the kubelet's device manager does
// (GetPreferredAllocation among the healthy devices it has not handed out, then Allocate).
// restart() is a kubelet restart: the sockets in the directory are deleted and kubelet.sock is
// served anew.
//
// Thread-safe: the gRPC threads and the test thread meet under one mutex.
#pragma once

#include <grpcpp/grpcpp.h>

#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "deviceplugin/v1beta1/api.grpc.pb.h"

namespace gapless::test {

class FakeKubelet final : public v1beta1::Registration::Service {
 public:
  struct Admitted {
    bool ok = false;
    std::string error;                       // why Allocate failed
    std::vector<std::string> ids;            // the devices the kubelet chose
    std::map<std::string, std::string> env;  // what the plugin answered
  };

  explicit FakeKubelet(std::string dir) : dir_(std::move(dir)) { serve(); }
  ~FakeKubelet() {
    stop_server();
    std::lock_guard lock(mu_);
    for (auto& [name, p] : plugins_) p->end();
  }

  void restart() {
    stop_server();
    for (const auto& entry : std::filesystem::directory_iterator(dir_)) {
      if (entry.is_socket()) std::filesystem::remove(entry.path());
    }
    serve();
  }

  int registrations() const {
    std::lock_guard lock(mu_);
    return registrations_;
  }
  std::vector<v1beta1::RegisterRequest> requests() const {
    std::lock_guard lock(mu_);
    return requests_;
  }

  // The last device list the plugin of `resource` streamed: id -> health.
  std::map<std::string, std::string> devices(const std::string& resource) const {
    std::lock_guard lock(mu_);
    auto it = plugins_.find(resource);
    return it == plugins_.end() ? std::map<std::string, std::string>{} : it->second->devices();
  }

  // One container asking for `count` devices of `resource`, as the device manager admits it.
  Admitted admit(const std::string& resource, int count) {
    std::shared_ptr<Plugin> p;
    std::vector<std::string> available;
    {
      std::lock_guard lock(mu_);
      p = plugins_.at(resource);
      for (const auto& [id, health] : p->devices()) {
        if (health == "Healthy" && !allocated_[resource].contains(id)) available.push_back(id);
      }
    }
    Admitted out;
    if (static_cast<int>(available.size()) < count) {
      out.error = "not enough devices";
      return out;
    }
    out.ids = choose(*p, available, count);
    v1beta1::AllocateRequest req;
    auto* c = req.add_container_requests();
    for (const auto& id : out.ids) c->add_devices_ids(id);
    v1beta1::AllocateResponse resp;
    grpc::ClientContext ctx;
    const grpc::Status s = p->stub->Allocate(&ctx, req, &resp);
    if (!s.ok()) {
      out.error = s.error_message();
      return out;
    }
    out.ok = resp.container_responses_size() == 1;
    if (out.ok) {
      for (const auto& [k, v] : resp.container_responses(0).envs()) out.env[k] = v;
    }
    std::lock_guard lock(mu_);
    allocated_[resource].insert(out.ids.begin(), out.ids.end());
    return out;
  }

  grpc::Status Register(grpc::ServerContext*, const v1beta1::RegisterRequest* req,
                        v1beta1::Empty*) override {
    auto p = std::make_shared<Plugin>(dir_ + "/" + req->endpoint());
    std::lock_guard lock(mu_);
    ++registrations_;
    requests_.push_back(*req);
    if (auto it = plugins_.find(req->resource_name()); it != plugins_.end()) it->second->end();
    plugins_[req->resource_name()] = p;
    return grpc::Status::OK;
  }

 private:
  // The kubelet's side of one registered plugin: a stub and the ListAndWatch reader.
  struct Plugin {
    explicit Plugin(const std::string& socket)
        : stub(v1beta1::DevicePlugin::NewStub(
              grpc::CreateChannel("unix:" + socket, grpc::InsecureChannelCredentials()))) {
      reader = std::thread([this] {
        v1beta1::Empty empty;
        auto stream = stub->ListAndWatch(&watch_ctx, empty);
        v1beta1::ListAndWatchResponse r;
        while (stream->Read(&r)) {
          std::map<std::string, std::string> list;
          for (const auto& d : r.devices()) list[d.id()] = d.health();
          std::lock_guard lock(mu);
          latest = std::move(list);
        }
        stream->Finish().ok();  // the status is of no interest: the plugin went away
      });
    }
    ~Plugin() { end(); }
    void end() {
      watch_ctx.TryCancel();
      if (reader.joinable() && reader.get_id() != std::this_thread::get_id()) reader.join();
    }
    std::map<std::string, std::string> devices() const {
      std::lock_guard lock(mu);
      return latest;
    }
    std::unique_ptr<v1beta1::DevicePlugin::Stub> stub;
    grpc::ClientContext watch_ctx;
    mutable std::mutex mu;
    std::map<std::string, std::string> latest;
    std::thread reader;
  };

  // The device manager: the plugin's preference where it is available, the rest in order.
  std::vector<std::string> choose(Plugin& p, const std::vector<std::string>& available, int count) {
    v1beta1::PreferredAllocationRequest req;
    auto* c = req.add_container_requests();
    for (const auto& id : available) c->add_available_deviceids(id);
    c->set_allocation_size(count);
    v1beta1::PreferredAllocationResponse resp;
    grpc::ClientContext ctx;
    std::vector<std::string> chosen;
    const std::set<std::string> avail(available.begin(), available.end());
    if (p.stub->GetPreferredAllocation(&ctx, req, &resp).ok() &&
        resp.container_responses_size() == 1) {
      for (const auto& id : resp.container_responses(0).deviceids()) {
        if (avail.contains(id) && static_cast<int>(chosen.size()) < count) chosen.push_back(id);
      }
    }
    for (const auto& id : available) {
      if (static_cast<int>(chosen.size()) == count) break;
      if (std::find(chosen.begin(), chosen.end(), id) == chosen.end()) chosen.push_back(id);
    }
    return chosen;
  }

  void serve() {
    grpc::ServerBuilder b;
    b.AddListeningPort("unix:" + dir_ + "/kubelet.sock", grpc::InsecureServerCredentials());
    b.RegisterService(this);
    server_ = b.BuildAndStart();
    if (!server_) throw std::runtime_error("fake kubelet cannot serve in " + dir_);
  }
  void stop_server() {
    if (!server_) return;
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(200));
    server_->Wait();
    server_.reset();
  }

  std::string dir_;
  std::unique_ptr<grpc::Server> server_;
  mutable std::mutex mu_;
  int registrations_ = 0;
  std::vector<v1beta1::RegisterRequest> requests_;
  std::map<std::string, std::shared_ptr<Plugin>> plugins_;
  std::map<std::string, std::set<std::string>> allocated_;
};

}  // namespace gapless::test
