// The fake API server's writes besides the test hooks: pods/binding and events; and the
// Status objects every error answer is.
#include <httplib.h>

#include <ctime>

#include "fake_api_internal.h"
#include "fake_api_server.h"

namespace gapless::test {

using nlohmann::json;

void send_json(httplib::Response& res, int code, const json& body) {
  res.status = code;
  res.set_content(body.dump(), "application/json");
}

std::string string_at(const json& obj, const char* a, const char* b) {
  auto i = obj.find(a);
  if (i == obj.end() || !i->is_object()) return "";
  auto j = i->find(b);
  return j != i->end() && j->is_string() ? j->get<std::string>() : "";
}

// ---- Status objects and time -------------------------------------------------------------

std::string status_reason(int code) {
  switch (code) {
    case 400:
      return "BadRequest";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "NotFound";
    case 405:
      return "MethodNotAllowed";
    case 409:
      return "Conflict";
    case 410:
      return "Expired";
    case 422:
      return "Invalid";
    case 429:
      return "TooManyRequests";
    case 500:
      return "InternalError";
    case 503:
      return "ServiceUnavailable";
    case 504:
      return "Timeout";
    default:
      return "Unknown";
  }
}

json failure_status(int code, const std::string& message, const json& details) {
  json s = {{"kind", "Status"},    {"apiVersion", "v1"}, {"metadata", json::object()},
            {"status", "Failure"}, {"message", message}, {"reason", status_reason(code)}};
  if (!details.is_null()) s["details"] = details;
  s["code"] = code;
  return s;
}

json success_status(int code) {
  return {{"kind", "Status"},
          {"apiVersion", "v1"},
          {"metadata", json::object()},
          {"status", "Success"},
          {"code", code}};
}

std::string now_rfc3339() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// ---- Binding and events ------------------------------------------------------------------

// BindingREST.Create and setPodHostAndAnnotations (extender-protocol.md §4.2).
int FakeApiServer::bind_locked(const std::string& ns, const std::string& name, const json& binding,
                               json* status) {
  auto fail = [&](int code, const std::string& message, json details = nullptr) {
    *status = failure_status(code, message, details);
    return code;
  };
  const std::string conflict = "Operation cannot be fulfilled on pods/binding \"" + name + "\": ";
  const json conflict_details = {{"name", name}, {"kind", "pods/binding"}};
  if (!binding.is_object()) return fail(400, "the request body is not a Binding object");
  if (string_at(binding, "metadata", "name") != name) {
    return fail(400, "name in URL does not match name in Binding object");
  }
  const std::string target_kind = string_at(binding, "target", "kind");
  if (!target_kind.empty() && target_kind != "Node") {
    return fail(422, "Binding \"" + name + "\" is invalid: target.kind: Unsupported value: \"" +
                         target_kind + "\": supported values: \"Node\"");
  }
  const std::string node_name = string_at(binding, "target", "name");
  if (node_name.empty()) {
    return fail(422, "Binding \"" + name + "\" is invalid: target.name: Required value");
  }
  auto it = pods_.find(ns + "/" + name);
  if (it == pods_.end()) {
    return fail(404, "pods \"" + name + "\" not found", {{"name", name}, {"kind", "pods"}});
  }
  const json& pod = it->second->obj;
  const std::string want_uid = string_at(binding, "metadata", "uid");
  const std::string uid = string_at(pod, "metadata", "uid");
  if (!want_uid.empty() && want_uid != uid) {
    return fail(409,
                conflict + "Precondition failed: UID in precondition: " + want_uid +
                    ", UID in object meta: " + uid,
                conflict_details);
  }
  const std::string want_rv = string_at(binding, "metadata", "resourceVersion");
  const std::string rv = string_at(pod, "metadata", "resourceVersion");
  if (!want_rv.empty() && want_rv != rv) {
    return fail(409,
                conflict + "Precondition failed: ResourceVersion in precondition: " + want_rv +
                    ", ResourceVersion in object meta: " + rv,
                conflict_details);
  }
  if (!string_at(pod, "metadata", "deletionTimestamp").empty()) {
    return fail(409, conflict + "pod " + name + " is being deleted, cannot be assigned to a host",
                conflict_details);
  }
  const std::string bound_to = string_at(pod, "spec", "nodeName");
  if (!bound_to.empty()) {
    return fail(409, conflict + "pod " + name + " is already assigned to node \"" + bound_to + "\"",
                conflict_details);
  }
  if (pod.contains("spec") && pod["spec"].contains("schedulingGates") &&
      !pod["spec"]["schedulingGates"].empty()) {
    return fail(409, conflict + "pod " + name + " has non-empty .spec.schedulingGates",
                conflict_details);
  }
  json updated = pod;
  updated["spec"]["nodeName"] = node_name;
  const json& meta = binding.at("metadata");
  if (auto a = meta.find("annotations"); a != meta.end() && a->is_object()) {
    for (const auto& [k, v] : a->items()) {
      if (v.is_string()) updated["metadata"]["annotations"][k] = v;
    }
  }
  json& conditions = updated["status"]["conditions"];
  if (!conditions.is_array()) conditions = json::array();
  json scheduled = {{"type", "PodScheduled"},
                    {"status", "True"},
                    {"lastProbeTime", nullptr},
                    {"lastTransitionTime", now_rfc3339()}};
  bool replaced = false;
  for (json& c : conditions) {
    if (c.is_object() && c.value("type", "") == "PodScheduled") {
      c = scheduled;
      replaced = true;
    }
  }
  if (!replaced) conditions.push_back(scheduled);
  put_locked(Kind::kPod, std::move(updated), "MODIFIED");
  bindings_.push_back(binding);
  *status = success_status(201);
  return 201;
}

int FakeApiServer::bind_pod(const std::string& ns, const std::string& name, const std::string& node,
                            const std::map<std::string, std::string>& annotations,
                            const std::string& uid) {
  json binding = {{"kind", "Binding"},
                  {"apiVersion", "v1"},
                  {"metadata", {{"name", name}, {"namespace", ns}}},
                  {"target", {{"kind", "Node"}, {"apiVersion", "v1"}, {"name", node}}}};
  if (!uid.empty()) binding["metadata"]["uid"] = uid;
  if (!annotations.empty()) binding["metadata"]["annotations"] = annotations;
  json status;
  std::lock_guard lock(mu_);
  return bind_locked(ns, name, binding, &status);
}

void FakeApiServer::handle_binding(const httplib::Request& req, httplib::Response& res) {
  const json binding = json::parse(req.body, nullptr, false);
  json status;
  int code = 0;
  if (binding.is_discarded()) {
    code = 400;
    status = failure_status(400, "the request body is not valid JSON");
  } else {
    std::lock_guard lock(mu_);
    code = bind_locked(req.matches[1], req.matches[2], binding, &status);
  }
  send_json(res, code, status);
}

void FakeApiServer::handle_event(const httplib::Request& req, httplib::Response& res) {
  json event = json::parse(req.body, nullptr, false);
  if (!event.is_object()) {
    return send_json(res, 400, failure_status(400, "the request body is not an Event object"));
  }
  const std::string ns = req.matches[1];
  json& meta = event["metadata"];
  if (!meta.is_object()) meta = json::object();
  const std::string given_ns = string_at(event, "metadata", "namespace");
  if (!given_ns.empty() && given_ns != ns) {
    return send_json(res, 400,
                     failure_status(400,
                                    "the namespace of the provided object does not match the "
                                    "namespace sent on the request"));
  }
  meta["namespace"] = ns;
  std::lock_guard lock(mu_);
  if (string_at(event, "metadata", "name").empty()) {
    const std::string prefix = string_at(event, "metadata", "generateName");
    if (prefix.empty()) {
      return send_json(res, 422,
                       failure_status(422, "Event is invalid: metadata.name: Required value"));
    }
    meta["name"] = prefix + std::to_string(1000 + events_.size());
  }
  meta["uid"] = "uid-event-" + std::to_string(++uid_counter_);
  events_.push_back(event);
  send_json(res, 201, event);
}

void FakeApiServer::handle_node_patch(const httplib::Request& req, httplib::Response& res) {
  merge_patch(req, res, Kind::kNode, "", req.matches[1]);
}

void FakeApiServer::handle_pod_patch(const httplib::Request& req, httplib::Response& res) {
  merge_patch(req, res, Kind::kPod, req.matches[1], req.matches[2]);
}

// RFC 7386 merge patch, as `kubectl patch --type merge` sends it: the node agent's annotations
// and product label on its Node, and its marks on pods (gapless.io/allocated,
// gapless.io/share-overuse).
void FakeApiServer::merge_patch(const httplib::Request& req, httplib::Response& res, Kind kind,
                                const std::string& ns, const std::string& name) {
  if (req.get_header_value("Content-Type") != "application/merge-patch+json") {
    return send_json(res, 415, failure_status(415, "the fake API server takes merge patches only"));
  }
  const json patch = json::parse(req.body, nullptr, false);
  if (!patch.is_object()) {
    return send_json(res, 400, failure_status(400, "the request body is not a JSON object"));
  }
  const std::string plural = kind == Kind::kNode ? "nodes" : "pods";
  const std::string key = ns.empty() ? name : ns + "/" + name;
  std::lock_guard lock(mu_);
  Store& objects = store(kind);
  auto it = objects.find(key);
  if (it == objects.end()) {
    return send_json(res, 404,
                     failure_status(404, plural + " \"" + name + "\" not found",
                                    {{"name", name}, {"kind", plural}}));
  }
  // A resourceVersion in the patch is a precondition, as on the real server (optimistic lock).
  const std::string want_rv = string_at(patch, "metadata", "resourceVersion");
  if (!want_rv.empty() && want_rv != string_at(it->second->obj, "metadata", "resourceVersion")) {
    return send_json(res, 409,
                     failure_status(409, "Operation cannot be fulfilled on " + plural + " \"" +
                                             name + "\": the object has been modified"));
  }
  json updated = it->second->obj;
  updated.merge_patch(patch);
  // The name (and namespace) is the key; the real server rejects a patch that changes it.
  if (!updated["metadata"].is_object()) updated["metadata"] = json::object();
  updated["metadata"]["name"] = name;
  if (!ns.empty()) updated["metadata"]["namespace"] = ns;
  put_locked(kind, std::move(updated), "MODIFIED");
  send_json(res, 200, objects.at(key)->obj);
}

}  // namespace gapless::test
