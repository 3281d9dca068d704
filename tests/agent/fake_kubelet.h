// A fake kubelet for the device plugin tests: the Registration service on kubelet.sock in a
// directory, and, for every plugin that registers, a client of its DevicePlugin service that
// follows ListAndWatch and admits containers the way the kubelet's device manager does
// (GetPreferredAllocation among the healthy devices it has not handed out, then Allocate).
// restart() is a kubelet restart: the sockets in the directory are deleted and kubelet.sock is
// served anew.
//
// admit_batch() admits whole pods as the v1.26 kubelet does (pkg/kubelet HandlePodAdditions and
// the device manager's Allocate): the pods that reached it together are sorted by
// creationTimestamp, which has one-second resolution, with an unstable sort (ties come in the
// order the test asks for); then one pod at a time, every container that asks for a device
// resource is allocated during that pod's admission, init containers first: the kubelet first
// reuses devices the pod's init containers hold (in no particular order), asks the plugin's
// GetPreferredAllocation for the rest (those reused as must-include), then calls Allocate. A
// pod one of whose Allocates fails is not admitted, and its devices go back.
//
// Thread-safe: the gRPC threads and the test thread meet under one mutex.
#pragma once

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <random>
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
  // `reuse`: devices the pod's init containers hold, taken first (the kubelet's devicesToReuse).
  Admitted admit(const std::string& resource, int count,
                 const std::vector<std::string>& reuse = {}) {
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
    std::vector<std::string> must(reuse.begin(),
                                  reuse.begin() + std::min<std::size_t>(reuse.size(), count));
    if (static_cast<int>(available.size() + must.size()) < count) {
      out.error = "not enough devices";
      return out;
    }
    out.ids = static_cast<int>(must.size()) == count ? must : choose(*p, available, count, must);
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

  // A pod as the kubelet receives it: its creationTimestamp (RFC 3339, seconds) and the
  // containers that ask for a device resource, init containers first.
  struct PodContainer {
    std::string name, resource;
    int count = 0;
    bool init = false;
  };
  struct Pod {
    std::string uid, name, created;
    std::vector<PodContainer> containers;
  };
  struct PodResult {
    std::string uid, name;
    bool admitted = false;
    std::string error;                           // the Allocate that failed, and why
    std::map<std::string, Admitted> containers;  // by container name
  };
  // How pods created in the same second are ordered: the kubelet's sort is not stable.
  enum class Ties { kAsGiven, kReversed, kShuffled };

  // Admits the pods that reached the kubelet together, in the kubelet's order (see top).
  std::vector<PodResult> admit_batch(std::vector<Pod> pods, Ties ties, unsigned seed = 0) {
    if (ties == Ties::kReversed) std::reverse(pods.begin(), pods.end());
    if (ties == Ties::kShuffled) std::shuffle(pods.begin(), pods.end(), std::mt19937(seed));
    // RFC 3339 UTC at one-second resolution compares as text.
    std::stable_sort(pods.begin(), pods.end(),
                     [](const Pod& a, const Pod& b) { return a.created < b.created; });
    std::vector<PodResult> out;
    for (const Pod& pod : pods) out.push_back(admit_pod(pod));
    return out;
  }

  // Devices handed out by admit() are free again (their container's pod finished).
  void release(const std::string& resource, const std::vector<std::string>& ids) {
    std::lock_guard lock(mu_);
    for (const auto& id : ids) allocated_[resource].erase(id);
  }

  // The pod is gone: its devices are free again.
  void remove_pod(const std::string& uid) {
    std::lock_guard lock(mu_);
    auto it = pod_devices_.find(uid);
    if (it == pod_devices_.end()) return;
    for (const auto& [resource, ids] : it->second) {
      for (const auto& id : ids) allocated_[resource].erase(id);
    }
    pod_devices_.erase(it);
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

  PodResult admit_pod(const Pod& pod) {
    PodResult r{pod.uid, pod.name, false, "", {}};
    std::map<std::string, std::vector<std::string>> reusable;  // init containers' devices
    std::map<std::string, std::set<std::string>> held;
    for (const PodContainer& c : pod.containers) {
      std::vector<std::string> reuse = reusable[c.resource];
      std::reverse(reuse.begin(), reuse.end());  // the kubelet takes them from a set, any order
      Admitted a = admit(c.resource, c.count, reuse);
      r.containers[c.name] = a;
      if (!a.ok) {
        r.error = c.name + ": " + a.error;
        std::lock_guard lock(mu_);
        for (const auto& [resource, ids] : held) {
          for (const auto& id : ids) allocated_[resource].erase(id);
        }
        return r;
      }
      held[c.resource].insert(a.ids.begin(), a.ids.end());
      auto& pool = reusable[c.resource];
      if (c.init) {
        for (const auto& id : a.ids) {
          if (std::find(pool.begin(), pool.end(), id) == pool.end()) pool.push_back(id);
        }
      } else {
        std::erase_if(pool, [&](const std::string& id) {
          return std::find(a.ids.begin(), a.ids.end(), id) != a.ids.end();
        });
      }
    }
    std::lock_guard lock(mu_);
    pod_devices_[pod.uid] = held;
    r.admitted = true;
    return r;
  }

  // The device manager: the plugin's preference where it is available, the rest in order.
  std::vector<std::string> choose(Plugin& p, const std::vector<std::string>& available, int count,
                                  const std::vector<std::string>& must = {}) {
    v1beta1::PreferredAllocationRequest req;
    auto* c = req.add_container_requests();
    for (const auto& id : available) c->add_available_deviceids(id);
    for (const auto& id : must) {
      c->add_available_deviceids(id);
      c->add_must_include_deviceids(id);
    }
    c->set_allocation_size(count);
    v1beta1::PreferredAllocationResponse resp;
    grpc::ClientContext ctx;
    std::vector<std::string> chosen = must;
    std::set<std::string> avail(available.begin(), available.end());
    avail.insert(must.begin(), must.end());
    if (p.stub->GetPreferredAllocation(&ctx, req, &resp).ok() &&
        resp.container_responses_size() == 1) {
      for (const auto& id : resp.container_responses(0).deviceids()) {
        if (avail.contains(id) && static_cast<int>(chosen.size()) < count &&
            std::find(chosen.begin(), chosen.end(), id) == chosen.end()) {
          chosen.push_back(id);
        }
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
  // Admitted pods' devices: uid -> resource -> device IDs.
  std::map<std::string, std::map<std::string, std::set<std::string>>> pod_devices_;
};

}  // namespace gapless::test
