// agent::DevicePlugin: the gRPC server's life, registration with the kubelet and the watch for
// a restarted kubelet. The service itself is in device_plugin_service.cpp.
#include "gapless/agent/device_plugin.h"

#include <grpcpp/grpcpp.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <thread>

#include "device_plugin_service.h"

namespace gapless::agent {

namespace {

constexpr std::chrono::seconds kRegisterTimeout{5};
// How long a stopping server lets its calls finish before it cancels them.
constexpr std::chrono::milliseconds kShutdownGrace{500};

// A socket file as it is now: a restarted kubelet's kubelet.sock is a new file.
struct FileStamp {
  ino_t inode = 0;
  long long ctime_ns = 0;
  bool operator==(const FileStamp&) const = default;
};

std::optional<FileStamp> stamp_of(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
  return FileStamp{st.st_ino,
                   static_cast<long long>(st.st_ctim.tv_sec) * 1000000000LL + st.st_ctim.tv_nsec};
}

// A MIG resource's devices on one GPU: every start its profile allows on a GPU without
// instances of its own, else the GPU's instances of that profile.
void add_mig_devices(const GpuState& g, const std::string& profile,
                     std::vector<PluginDevice>* out) {
  const model::MigProfile* p = model::find_mig_profile(model::mig_family_of(g.model), profile);
  if (p == nullptr) return;
  std::vector<int> starts = p->starts;
  if (!g.mig_instances.empty()) {
    starts.clear();
    for (const auto& i : g.mig_instances) {
      if (i.profile == profile) starts.push_back(i.start);
    }
  }
  for (int start : starts) {
    out->push_back({mig_device_id(g.uuid, start), g.uuid, g.index, g.healthy, g.numa, start});
  }
}

std::vector<PluginDevice> devices_of(const std::vector<GpuState>& gpus,
                                     const DevicePluginOptions& o) {
  const std::string profile = mig_profile_of(o.resource);
  std::vector<PluginDevice> out;
  for (const auto& g : gpus) {
    if (g.uuid.empty()) continue;  // never read: nothing the kubelet could name
    // A MIG-enabled GPU serves only through its instances (as NVIDIA's mixed strategy does),
    // and Gapless never places whole GPUs or shares on one.
    if (!profile.empty()) {
      if (g.mig_enabled) add_mig_devices(g, profile, &out);
      continue;
    }
    if (g.mig_enabled) continue;
    if (o.share_slots <= 0) {
      out.push_back({g.uuid, g.uuid, g.index, g.healthy, g.numa});
      continue;
    }
    for (int k = 0; k < o.share_slots; ++k) {
      out.push_back({g.uuid + "::" + std::to_string(k), g.uuid, g.index, g.healthy, g.numa});
    }
  }
  return out;
}

}  // namespace

// "nvidia.com/gpu" -> "gapless-nvidia.com-gpu": the stem of the plugin's files.
std::string file_stem(const std::string& resource) {
  std::string stem = "gapless-" + resource;
  std::replace(stem.begin(), stem.end(), '/', '-');
  return stem;
}

std::string plugin_socket_name(const std::string& resource) {
  return file_stem(resource) + ".sock";
}

struct DevicePlugin::Impl {
  DevicePluginOptions options;
  k8s::ApiTransport& api;
  std::function<void(const std::string&)> log;
  DeviceTable table;
  AllocationCheckpoint checkpoint;
  DevicePluginService service;
  std::unique_ptr<grpc::Server> server;
  std::thread watcher;
  std::mutex mu;  // stopping, the condition variable
  std::condition_variable wake;
  bool stopping = false;
  std::optional<FileStamp> registered_with;  // the kubelet.sock we registered with
  std::optional<FileStamp> failed_with;      // the kubelet.sock a registration last failed on
  std::atomic<int> registrations{0};

  Impl(DevicePluginOptions o, k8s::ApiTransport& a, std::function<void(const std::string&)> l)
      : options(std::move(o)),
        api(a),
        log(std::move(l)),
        checkpoint(checkpoint_dir() + "/" + file_stem(options.resource) + ".checkpoint.json"),
        service(options, api, table, checkpoint, log) {}

  std::string socket() const {
    return options.plugin_dir + "/" + plugin_socket_name(options.resource);
  }
  // A directory of its own: a restarting kubelet deletes every file in the plugin dir but its
  // own checkpoint (the sockets only, since Kubernetes 1.2x), and never a directory.
  std::string checkpoint_dir() const { return options.plugin_dir + "/gapless"; }
  std::string kubelet_socket() const { return options.plugin_dir + "/kubelet.sock"; }
  void say(const std::string& line) const {
    if (log) log("device plugin " + options.resource + ": " + line);
  }

  Status serve() {
    std::error_code ignored;
    std::filesystem::remove(socket(), ignored);  // a stale socket of an earlier run
    grpc::ServerBuilder builder;
    builder.AddListeningPort("unix:" + socket(), grpc::InsecureServerCredentials());
    builder.RegisterService(&service);
    server = builder.BuildAndStart();
    if (!server) return Error{"cannot serve the device plugin on " + socket()};
    return {};
  }

  void shutdown_server() {
    if (!server) return;
    table.interrupt();  // ends ListAndWatch streams, which would hold Shutdown
    server->Shutdown(std::chrono::system_clock::now() + kShutdownGrace);
    server->Wait();
    server.reset();
  }

  bool register_with_kubelet(const FileStamp& kubelet) {
    auto channel =
        grpc::CreateChannel("unix:" + kubelet_socket(), grpc::InsecureChannelCredentials());
    auto stub = v1beta1::Registration::NewStub(channel);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + kRegisterTimeout);
    v1beta1::RegisterRequest request;
    request.set_version("v1beta1");
    request.set_endpoint(plugin_socket_name(options.resource));
    request.set_resource_name(options.resource);
    request.mutable_options()->set_get_preferred_allocation_available(true);
    v1beta1::Empty reply;
    const grpc::Status s = stub->Register(&ctx, request, &reply);
    // Retried every recheck; said once per kubelet.sock, not every second.
    if (!s.ok() && failed_with != kubelet) {
      say("registering with the kubelet failed (retrying): " + s.error_message());
    }
    failed_with = s.ok() ? std::optional<FileStamp>{} : kubelet;
    return s.ok();
  }

  // One look: our socket gone (a restarted kubelet deletes it) -> serve again; a kubelet.sock
  // we have not registered with -> register.
  void check() {
    if (!std::filesystem::exists(socket())) {
      say("socket " + socket() + " is gone (kubelet restart?), serving it again");
      shutdown_server();
      if (Status s = serve(); !s.ok()) return say(s.error());
      registered_with.reset();
    }
    auto kubelet = stamp_of(kubelet_socket());
    if (!kubelet || kubelet == registered_with) return;
    if (register_with_kubelet(*kubelet)) {
      registered_with = kubelet;
      ++registrations;
      say("registered with the kubelet");
      if (options.on_registered) options.on_registered();
    }
  }

  void watch() {
    std::unique_lock lock(mu);
    while (!stopping) {
      lock.unlock();
      check();
      lock.lock();
      wake.wait_for(lock, options.recheck, [&] { return stopping; });
    }
  }
};

DevicePlugin::DevicePlugin(DevicePluginOptions options, k8s::ApiTransport& api,
                           std::function<void(const std::string&)> log)
    : impl_(std::make_unique<Impl>(std::move(options), api, std::move(log))) {}

DevicePlugin::~DevicePlugin() {
  stop();
}

Status DevicePlugin::start() {
  std::error_code made;
  std::filesystem::create_directories(impl_->checkpoint_dir(), made);
  if (made) return Error{"cannot create " + impl_->checkpoint_dir() + ": " + made.message()};
  if (Status s = impl_->checkpoint.load(); !s.ok()) {
    impl_->say("starting with an empty checkpoint: " + s.error());
  }
  if (Status s = impl_->serve(); !s.ok()) return s;
  impl_->watcher = std::thread([this] { impl_->watch(); });
  return {};
}

void DevicePlugin::stop() {
  {
    std::lock_guard lock(impl_->mu);
    impl_->stopping = true;
  }
  impl_->wake.notify_all();
  if (impl_->watcher.joinable()) impl_->watcher.join();
  impl_->shutdown_server();
  std::error_code ignored;
  std::filesystem::remove(impl_->socket(), ignored);
}

void DevicePlugin::set_gpus(const std::vector<GpuState>& gpus) {
  impl_->table.set(devices_of(gpus, impl_->options));
}

int DevicePlugin::registrations() const {
  return impl_->registrations.load();
}

const std::string& DevicePlugin::resource() const {
  return impl_->options.resource;
}

std::string registered_resources(const std::vector<std::unique_ptr<DevicePlugin>>& plugins) {
  std::string out;
  for (const auto& p : plugins) {
    if (p->registrations() == 0) continue;
    out += (out.empty() ? "" : ",") + p->resource();
  }
  return out;
}

std::string DevicePlugin::socket_path() const {
  return impl_->socket();
}

}  // namespace gapless::agent
