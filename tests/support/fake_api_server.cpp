// The fake API server's lifecycle, request checks (token, faults, log), store and test hooks,
// single-object routes. Lists and watches: fake_api_lists.cpp; binding, events and Status
// objects: fake_api_writes.cpp.
#include "fake_api_server.h"

#include <httplib.h>
#include <signal.h>

#include <stdexcept>

#include "fake_api_internal.h"

namespace gapless::test {

using nlohmann::json;

namespace {

std::string pod_key(const std::string& ns, const std::string& name) {
  return ns + "/" + name;
}

}  // namespace

const FakeApiServer::KindInfo& FakeApiServer::info(Kind kind) {
  // pkg/registry/*/strategy.go ToSelectableFields (and the generic metadata.name/namespace).
  static const KindInfo kInfo[] = {
      {"Node", "NodeList", "v1", false, {"metadata.name", "spec.unschedulable"}},
      {"Pod",
       "PodList",
       "v1",
       true,
       {"metadata.name", "metadata.namespace", "spec.nodeName", "spec.restartPolicy",
        "spec.schedulerName", "spec.serviceAccountName", "spec.hostNetwork", "status.phase",
        "status.podIP", "status.nominatedNodeName"}},
      {"Namespace", "NamespaceList", "v1", false, {"metadata.name", "status.phase"}},
      {"PodDisruptionBudget",
       "PodDisruptionBudgetList",
       "policy/v1",
       true,
       {"metadata.name", "metadata.namespace"}},
  };
  return kInfo[static_cast<std::size_t>(kind)];
}

std::string FakeApiServer::Entry::full_text() const {
  const std::string head = std::string(R"({"apiVersion":")") + info(kind).api_version +
                           R"(","kind":")" + info(kind).kind + "\"";
  if (item_text.size() <= 2) return head + "}";
  return head + "," + item_text.substr(1);
}

// ---- Lifecycle ---------------------------------------------------------------------------

FakeApiServer::FakeApiServer(std::string token)
    : http_(std::make_unique<httplib::Server>()), token_(std::move(token)) {
  // A watch written to after its client left must not kill the test (httplib 0.11 sends
  // without MSG_NOSIGNAL).
  signal(SIGPIPE, SIG_IGN);
  auto& s = *http_;
  s.new_task_queue = [] { return new httplib::ThreadPool(64); };  // a thread per open watch
  s.set_keep_alive_timeout(1);
  s.set_payload_max_length(std::size_t{64} << 20);
  // Every route checks the token and faults first (after the body is read).
  auto guarded = [this](auto handler) {
    return [this, handler](const httplib::Request& req, httplib::Response& res) {
      if (!pre_route(req, res)) handler(req, res);
    };
  };
  s.Get("/api/v1/nodes", guarded([this](const auto& req, auto& res) {
          handle_list_or_watch(Kind::kNode, "", req, res);
        }));
  s.Get("/api/v1/pods", guarded([this](const auto& req, auto& res) {
          handle_list_or_watch(Kind::kPod, "", req, res);
        }));
  s.Get(R"(/api/v1/namespaces/([^/]+)/pods)", guarded([this](const auto& req, auto& res) {
          handle_list_or_watch(Kind::kPod, req.matches[1], req, res);
        }));
  s.Get("/api/v1/namespaces", guarded([this](const auto& req, auto& res) {
          handle_list_or_watch(Kind::kNamespace, "", req, res);
        }));
  s.Get("/apis/policy/v1/poddisruptionbudgets", guarded([this](const auto& req, auto& res) {
          handle_list_or_watch(Kind::kPdb, "", req, res);
        }));
  s.Get(R"(/apis/policy/v1/namespaces/([^/]+)/poddisruptionbudgets)",
        guarded([this](const auto& req, auto& res) {
          handle_list_or_watch(Kind::kPdb, req.matches[1], req, res);
        }));
  s.Get(R"(/api/v1/nodes/([^/]+))", guarded([this](const auto& req, auto& res) {
          auto n = node(req.matches[1]);
          if (n) return send_json(res, 200, *n);
          const std::string name = req.matches[1];
          send_json(res, 404,
                    failure_status(404, "nodes \"" + name + "\" not found",
                                   {{"name", name}, {"kind", "nodes"}}));
        }));
  s.Get(R"(/api/v1/namespaces/([^/]+)/pods/([^/]+))", guarded([this](const auto& req, auto& res) {
          auto p = pod(req.matches[1], req.matches[2]);
          if (p) return send_json(res, 200, *p);
          const std::string name = req.matches[2];
          send_json(res, 404,
                    failure_status(404, "pods \"" + name + "\" not found",
                                   {{"name", name}, {"kind", "pods"}}));
        }));
  s.Patch(R"(/api/v1/nodes/([^/]+))",
          guarded([this](const auto& req, auto& res) { handle_node_patch(req, res); }));
  s.Patch(R"(/api/v1/namespaces/([^/]+)/pods/([^/]+))",
          guarded([this](const auto& req, auto& res) { handle_pod_patch(req, res); }));
  s.Post(R"(/api/v1/namespaces/([^/]+)/pods/([^/]+)/binding)",
         guarded([this](const auto& req, auto& res) { handle_binding(req, res); }));
  s.Post(R"(/api/v1/namespaces/([^/]+)/events)",
         guarded([this](const auto& req, auto& res) { handle_event(req, res); }));
  add_config_map_routes();
  add_lease_routes();
  add_eviction_routes();
  s.Post(R"(/apis/events\.k8s\.io/v1/namespaces/([^/]+)/events)",
         guarded([this](const auto& req, auto& res) { handle_event(req, res); }));
  s.set_error_handler([](const httplib::Request&, httplib::Response& res) {
    if (!res.body.empty()) return;  // already a Status
    const int code = res.status;
    send_json(res, code,
              failure_status(code, code == 404 ? "the server could not find the requested resource"
                                               : status_reason(code)));
  });

  // As kube-apiserver (Go sets TCP_NODELAY): httplib writes headers and body apart, and on a
  // kept-alive connection Nagle would hold the body for the client's delayed ACK (40 ms).
  s.set_tcp_nodelay(true);
  port_ = s.bind_to_any_port("127.0.0.1");
  if (port_ <= 0) throw std::runtime_error("fake API server: cannot bind 127.0.0.1");
  thread_ = std::thread([this] { http_->listen_after_bind(); });
  while (!http_->is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

FakeApiServer::~FakeApiServer() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  changed_.notify_all();
  http_->stop();
  thread_.join();
}

std::string FakeApiServer::url() const {
  return "http://127.0.0.1:" + std::to_string(port_);
}

k8s::ClientConfig FakeApiServer::client_config() const {
  k8s::ClientConfig c;
  c.server = url();
  std::lock_guard lock(mu_);
  c.token = token_;
  c.timeout = std::chrono::seconds(5);
  return c;
}

// ---- Token, faults, log ------------------------------------------------------------------

bool FakeApiServer::pre_route(const httplib::Request& req, httplib::Response& res) {
  std::chrono::milliseconds delay{0};
  std::optional<Fault> fault;
  bool hold = false;
  {
    std::lock_guard lock(mu_);
    requests_.push_back({req.method, req.path, req.target, req.body,
                         req.get_header_value("Authorization"), req.remote_port});
    if (!token_.empty() && req.get_header_value("Authorization") != "Bearer " + token_) {
      send_json(res, 401, failure_status(401, "Unauthorized"));
      return true;
    }
    for (auto it = faults_.begin(); it != faults_.end(); ++it) {
      if (it->method != req.method || !req.path.starts_with(it->prefix)) continue;
      if (it->hold) {
        if (hold) continue;
        hold = true;
      } else if (it->status == 0 && delay.count() == 0) {
        delay = it->delay;
      } else if (it->status != 0 && !fault) {
        fault = *it;
      } else {
        continue;
      }
      --it->count;
    }
    std::erase_if(faults_, [](const Fault& f) { return f.count <= 0; });
  }
  if (hold) {
    std::unique_lock lock(mu_);
    const std::uint64_t generation = hold_generation_;
    ++held_;
    changed_.notify_all();
    changed_.wait(lock, [&] { return hold_generation_ != generation || stopping_; });
    --held_;
  }
  if (delay.count() > 0) std::this_thread::sleep_for(delay);
  if (!fault) return false;
  send_json(res, fault->status, failure_status(fault->status, fault->message));
  return true;
}

void FakeApiServer::set_token(std::string token) {
  std::lock_guard lock(mu_);
  token_ = std::move(token);
}

void FakeApiServer::fail_next(const std::string& method, const std::string& path_prefix, int count,
                              int status, const std::string& message) {
  if (status <= 0) throw std::logic_error("fail_next: status must be an HTTP status");
  std::lock_guard lock(mu_);
  faults_.push_back({method, path_prefix, count, status, message, {}});
}

void FakeApiServer::delay_next(const std::string& method, const std::string& path_prefix, int count,
                               std::chrono::milliseconds delay) {
  std::lock_guard lock(mu_);
  faults_.push_back({method, path_prefix, count, 0, "", delay});
}

void FakeApiServer::hold_next(const std::string& method, const std::string& path_prefix,
                              int count) {
  std::lock_guard lock(mu_);
  Fault f{method, path_prefix, count, 0, "", {}};
  f.hold = true;
  faults_.push_back(f);
}

void FakeApiServer::release_held() {
  {
    std::lock_guard lock(mu_);
    ++hold_generation_;
  }
  changed_.notify_all();
}

std::size_t FakeApiServer::held_requests() const {
  std::lock_guard lock(mu_);
  return held_;
}

std::vector<FakeApiServer::RequestRecord> FakeApiServer::requests() const {
  std::lock_guard lock(mu_);
  return requests_;
}

std::size_t FakeApiServer::count_requests(const std::string& method,
                                          const std::string& path_prefix) const {
  std::lock_guard lock(mu_);
  std::size_t n = 0;
  for (const auto& r : requests_) n += r.method == method && r.path.starts_with(path_prefix);
  return n;
}

std::vector<json> FakeApiServer::events() const {
  std::lock_guard lock(mu_);
  return events_;
}

std::vector<json> FakeApiServer::bindings() const {
  std::lock_guard lock(mu_);
  return bindings_;
}

void FakeApiServer::clear_log() {
  std::lock_guard lock(mu_);
  requests_.clear();
  events_.clear();
  bindings_.clear();
  evictions_.clear();
}

// ---- Store -------------------------------------------------------------------------------

FakeApiServer::EntryPtr FakeApiServer::make_entry(Kind kind, json obj) {
  if (!obj.is_object()) throw std::logic_error("fake API server: object is not a JSON object");
  json& meta = obj["metadata"];
  if (!meta.is_object() || !meta.contains("name") || !meta["name"].is_string()) {
    throw std::logic_error("fake API server: object without metadata.name");
  }
  if (info(kind).namespaced && string_at(obj, "metadata", "namespace").empty()) {
    meta["namespace"] = "default";
  }
  if (string_at(obj, "metadata", "uid").empty()) {
    meta["uid"] = "uid-" + meta["name"].get<std::string>() + "-" + std::to_string(++uid_counter_);
  }
  if (!meta.contains("creationTimestamp")) meta["creationTimestamp"] = now_rfc3339();
  auto e = std::make_shared<Entry>();
  e->kind = kind;
  const std::string name = meta["name"];
  e->key = info(kind).namespaced ? pod_key(meta["namespace"], name) : name;
  obj.erase("kind");
  obj.erase("apiVersion");
  e->item_text = obj.dump();
  obj["kind"] = info(kind).kind;
  obj["apiVersion"] = info(kind).api_version;
  e->obj = std::move(obj);
  return e;
}

std::string FakeApiServer::put_locked(Kind kind, json obj, const std::string& type) {
  obj["metadata"]["resourceVersion"] = std::to_string(rv_ + 1);
  EntryPtr entry = make_entry(kind, std::move(obj));
  auto& objects = store(kind);
  auto it = objects.find(entry->key);
  if (type == "ADDED" && it != objects.end()) {
    throw std::logic_error("fake API server: " + entry->key + " already exists");
  }
  if (type == "MODIFIED" && it == objects.end()) {
    throw std::logic_error("fake API server: no " + entry->key + " to modify");
  }
  EntryPtr old = it == objects.end() ? nullptr : it->second;
  ++rv_;
  objects[entry->key] = entry;
  history_.push_back({rv_, kind, type, entry, old});
  changed_.notify_all();
  return std::to_string(rv_);
}

std::string FakeApiServer::remove_locked(Kind kind, const std::string& key) {
  auto& objects = store(kind);
  auto it = objects.find(key);
  if (it == objects.end()) throw std::logic_error("fake API server: no " + key + " to delete");
  json obj = it->second->obj;
  obj["metadata"]["resourceVersion"] = std::to_string(++rv_);
  EntryPtr last = make_entry(kind, std::move(obj));
  objects.erase(it);
  history_.push_back({rv_, kind, "DELETED", last, nullptr});
  changed_.notify_all();
  return std::to_string(rv_);
}

std::string FakeApiServer::load(const std::vector<json>& nodes, const std::vector<json>& pods) {
  std::lock_guard lock(mu_);
  ++rv_;
  for (Store& objects : stores_) objects.clear();
  for (Kind kind : {Kind::kNode, Kind::kPod}) {
    for (json obj : kind == Kind::kNode ? nodes : pods) {
      obj["metadata"]["resourceVersion"] = std::to_string(rv_);
      EntryPtr e = make_entry(kind, std::move(obj));
      store(kind)[e->key] = e;
    }
  }
  history_.clear();
  oldest_rv_ = rv_;
  changed_.notify_all();
  return std::to_string(rv_);
}

std::string FakeApiServer::add_node(json node) {
  std::lock_guard lock(mu_);
  return put_locked(Kind::kNode, std::move(node), "ADDED");
}

std::string FakeApiServer::replace_node(json node) {
  std::lock_guard lock(mu_);
  return put_locked(Kind::kNode, std::move(node), "MODIFIED");
}

std::string FakeApiServer::update_node(const std::string& name,
                                       const std::function<void(json&)>& change) {
  std::lock_guard lock(mu_);
  auto it = nodes_.find(name);
  if (it == nodes_.end()) throw std::logic_error("fake API server: no node " + name);
  json obj = it->second->obj;
  change(obj);
  if (string_at(obj, "metadata", "name") != name) {
    throw std::logic_error("fake API server: update_node must not rename " + name);
  }
  return put_locked(Kind::kNode, std::move(obj), "MODIFIED");
}

std::string FakeApiServer::delete_node(const std::string& name) {
  std::lock_guard lock(mu_);
  return remove_locked(Kind::kNode, name);
}

std::string FakeApiServer::add_pod(json pod) {
  std::lock_guard lock(mu_);
  return put_locked(Kind::kPod, std::move(pod), "ADDED");
}

std::string FakeApiServer::replace_pod(json pod) {
  std::lock_guard lock(mu_);
  return put_locked(Kind::kPod, std::move(pod), "MODIFIED");
}

std::string FakeApiServer::update_pod(const std::string& ns, const std::string& name,
                                      const std::function<void(json&)>& change) {
  std::lock_guard lock(mu_);
  auto it = pods_.find(pod_key(ns, name));
  if (it == pods_.end()) throw std::logic_error("fake API server: no pod " + pod_key(ns, name));
  json obj = it->second->obj;
  change(obj);
  if (string_at(obj, "metadata", "name") != name || string_at(obj, "metadata", "namespace") != ns) {
    throw std::logic_error("fake API server: update_pod must not rename " + pod_key(ns, name));
  }
  return put_locked(Kind::kPod, std::move(obj), "MODIFIED");
}

std::string FakeApiServer::delete_pod(const std::string& ns, const std::string& name) {
  std::lock_guard lock(mu_);
  return remove_locked(Kind::kPod, pod_key(ns, name));
}

std::optional<json> FakeApiServer::node(const std::string& name) const {
  std::lock_guard lock(mu_);
  auto it = nodes_.find(name);
  if (it == nodes_.end()) return std::nullopt;
  return it->second->obj;
}

std::optional<json> FakeApiServer::pod(const std::string& ns, const std::string& name) const {
  std::lock_guard lock(mu_);
  auto it = pods_.find(pod_key(ns, name));
  if (it == pods_.end()) return std::nullopt;
  return it->second->obj;
}

std::size_t FakeApiServer::node_count() const {
  std::lock_guard lock(mu_);
  return nodes_.size();
}

std::size_t FakeApiServer::pod_count() const {
  std::lock_guard lock(mu_);
  return pods_.size();
}

std::string FakeApiServer::resource_version() const {
  std::lock_guard lock(mu_);
  return std::to_string(rv_);
}

}  // namespace gapless::test
