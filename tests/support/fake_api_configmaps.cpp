// The fake API server's ConfigMaps (extender-protocol.md §4, "Optimistic concurrency"): get,
// create, update and delete with the real server's resourceVersion semantics, enough for Gapless's
// per-node claim objects. Not listed or watched.
#include <httplib.h>

#include "fake_api_internal.h"
#include "fake_api_server.h"

namespace gapless::test {

using nlohmann::json;

namespace {

std::string cm_key(const std::string& ns, const std::string& name) {
  return ns + "/" + name;
}

json not_found(const std::string& name) {
  return failure_status(404, "configmaps \"" + name + "\" not found",
                        {{"name", name}, {"kind", "configmaps"}});
}

}  // namespace

void FakeApiServer::add_config_map_routes() {
  auto& s = *http_;
  auto guarded = [this](auto handler) {
    return [this, handler](const httplib::Request& req, httplib::Response& res) {
      if (!pre_route(req, res)) handler(req, res);
    };
  };
  s.Get(R"(/api/v1/namespaces/([^/]+)/configmaps/([^/]+))",
        guarded([this](const auto& req, auto& res) {
          std::lock_guard lock(mu_);
          auto it = config_maps_.find(cm_key(req.matches[1], req.matches[2]));
          if (it == config_maps_.end()) return send_json(res, 404, not_found(req.matches[2]));
          send_json(res, 200, it->second);
        }));
  s.Post(R"(/api/v1/namespaces/([^/]+)/configmaps)", guarded([this](const auto& req, auto& res) {
           handle_config_map_write(req, res, req.matches[1], "");
         }));
  s.Put(R"(/api/v1/namespaces/([^/]+)/configmaps/([^/]+))",
        guarded([this](const auto& req, auto& res) {
          handle_config_map_write(req, res, req.matches[1], req.matches[2]);
        }));
  s.Delete(R"(/api/v1/namespaces/([^/]+)/configmaps/([^/]+))",
           guarded([this](const auto& req, auto& res) {
             std::lock_guard lock(mu_);
             auto it = config_maps_.find(cm_key(req.matches[1], req.matches[2]));
             if (it == config_maps_.end()) return send_json(res, 404, not_found(req.matches[2]));
             config_maps_.erase(it);
             send_json(res, 200, json{{"kind", "Status"}, {"status", "Success"}});
           }));
}

// POST (`name` empty: create) or PUT (`name`: update). As the real server: create of an existing
// name is 409 AlreadyExists; an update whose metadata.resourceVersion is set and not the stored
// one is 409 Conflict; an update without one is unconditional; update of a missing object 404.
void FakeApiServer::handle_config_map_write(const httplib::Request& req, httplib::Response& res,
                                            const std::string& ns, const std::string& name) {
  json obj = json::parse(req.body, nullptr, false);
  if (!obj.is_object() || (obj.contains("metadata") && !obj["metadata"].is_object())) {
    return send_json(res, 400, failure_status(400, "the request body is not a ConfigMap"));
  }
  const std::string body_name = string_at(obj, "metadata", "name");
  const bool create = name.empty();
  if (body_name.empty() || (!create && body_name != name)) {
    return send_json(res, 400,
                     failure_status(400, "metadata.name must be set (and match the URL)"));
  }
  std::lock_guard lock(mu_);
  const std::string key = cm_key(ns, body_name);
  auto it = config_maps_.find(key);
  if (create && it != config_maps_.end()) {
    json st = failure_status(409, "configmaps \"" + body_name + "\" already exists",
                             {{"name", body_name}, {"kind", "configmaps"}});
    st["reason"] = "AlreadyExists";
    return send_json(res, 409, st);
  }
  if (!create && it == config_maps_.end()) return send_json(res, 404, not_found(body_name));
  const std::string want = string_at(obj, "metadata", "resourceVersion");
  if (!create && !want.empty() && want != string_at(it->second, "metadata", "resourceVersion")) {
    return send_json(res, 409,
                     failure_status(409,
                                    "Operation cannot be fulfilled on configmaps \"" + body_name +
                                        "\": the object has been modified; please apply your "
                                        "changes to the latest version and try again",
                                    {{"name", body_name}, {"kind", "configmaps"}}));
  }
  obj["kind"] = "ConfigMap";
  obj["apiVersion"] = "v1";
  obj["metadata"]["namespace"] = ns;
  obj["metadata"]["uid"] = create ? "uid-cm-" + body_name + "-" + std::to_string(++uid_counter_)
                                  : string_at(it->second, "metadata", "uid");
  obj["metadata"]["resourceVersion"] = std::to_string(++rv_);
  config_maps_[key] = obj;
  ++config_map_writes_;
  send_json(res, create ? 201 : 200, obj);
}

std::optional<json> FakeApiServer::config_map(const std::string& ns,
                                              const std::string& name) const {
  std::lock_guard lock(mu_);
  auto it = config_maps_.find(cm_key(ns, name));
  if (it == config_maps_.end()) return std::nullopt;
  return it->second;
}

std::size_t FakeApiServer::config_map_writes() const {
  std::lock_guard lock(mu_);
  return config_map_writes_;
}

}  // namespace gapless::test
