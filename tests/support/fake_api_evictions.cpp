// The fake API server's pods/eviction (policy/v1): as kube-apiserver's eviction REST handler,
// minus PodDisruptionBudgets (a test makes a budget refuse with fail_next(..., 429)). A real
// eviction marks the pod deleted (metadata.deletionTimestamp, MODIFIED) and keeps it, as a
// kubelet-less cluster would: a test deletes it with delete_pod when it "terminates".
#include <httplib.h>

#include "fake_api_internal.h"
#include "fake_api_server.h"

namespace gapless::test {

using nlohmann::json;

void FakeApiServer::add_eviction_routes() {
  http_->Post(R"(/api/v1/namespaces/([^/]+)/pods/([^/]+)/eviction)",
              [this](const httplib::Request& req, httplib::Response& res) {
                if (pre_route(req, res)) return;
                handle_eviction(req, res);
              });
}

void FakeApiServer::handle_eviction(const httplib::Request& req, httplib::Response& res) {
  const std::string ns = req.matches[1];
  const std::string name = req.matches[2];
  const json body = json::parse(req.body, nullptr, false);
  if (!body.is_object() || body.value("kind", "") != "Eviction" ||
      body.value("apiVersion", "") != "policy/v1" || string_at(body, "metadata", "name") != name) {
    return send_json(res, 400,
                     failure_status(400, "the request body is not an Eviction of " + name));
  }
  const bool dry_run = req.get_param_value("dryRun") == "All";
  std::string want_uid;
  if (auto o = body.find("deleteOptions"); o != body.end() && o->is_object()) {
    want_uid = string_at(*o, "preconditions", "uid");
  }
  std::lock_guard lock(mu_);
  auto it = pods_.find(ns + "/" + name);
  if (it == pods_.end()) {
    return send_json(
        res, 404,
        failure_status(404, "pods \"" + name + "\" not found", {{"name", name}, {"kind", "pods"}}));
  }
  if (!want_uid.empty() && string_at(it->second->obj, "metadata", "uid") != want_uid) {
    return send_json(res, 409,
                     failure_status(409, "Precondition failed: UID in precondition: " + want_uid,
                                    {{"name", name}, {"kind", "pods"}}));
  }
  if (!dry_run) {
    evictions_.push_back(ns + "/" + name);
    json obj = it->second->obj;
    if (!obj["metadata"].contains("deletionTimestamp")) {
      obj["metadata"]["deletionTimestamp"] = now_rfc3339();
      put_locked(Kind::kPod, std::move(obj), "MODIFIED");
    }
  }
  send_json(res, 201, success_status(201));
}

std::vector<std::string> FakeApiServer::evictions() const {
  std::lock_guard lock(mu_);
  return evictions_;
}

}  // namespace gapless::test
