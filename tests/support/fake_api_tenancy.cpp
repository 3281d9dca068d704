// The fake API server's Namespaces and PodDisruptionBudgets: test hooks only (the extender
// lists and watches them, never writes them).
#include <stdexcept>

#include "fake_api_internal.h"
#include "fake_api_server.h"

namespace gapless::test {

using nlohmann::json;

std::string FakeApiServer::change_locked(Kind kind, const std::string& key,
                                         const std::function<void(json&)>& change) {
  auto it = store(kind).find(key);
  if (it == store(kind).end()) throw std::logic_error("fake API server: no " + key + " to change");
  json obj = it->second->obj;
  change(obj);
  std::string now = string_at(obj, "metadata", "name");
  if (info(kind).namespaced) now = string_at(obj, "metadata", "namespace") + "/" + now;
  if (now != key) throw std::logic_error("fake API server: a change must not rename " + key);
  return put_locked(kind, std::move(obj), "MODIFIED");
}

std::string FakeApiServer::add_namespace(json ns) {
  std::lock_guard lock(mu_);
  return put_locked(Kind::kNamespace, std::move(ns), "ADDED");
}

std::string FakeApiServer::update_namespace(const std::string& name,
                                            const std::function<void(json&)>& change) {
  std::lock_guard lock(mu_);
  return change_locked(Kind::kNamespace, name, change);
}

std::string FakeApiServer::delete_namespace(const std::string& name) {
  std::lock_guard lock(mu_);
  return remove_locked(Kind::kNamespace, name);
}

std::string FakeApiServer::add_pdb(json pdb) {
  std::lock_guard lock(mu_);
  return put_locked(Kind::kPdb, std::move(pdb), "ADDED");
}

std::string FakeApiServer::update_pdb(const std::string& ns, const std::string& name,
                                      const std::function<void(json&)>& change) {
  std::lock_guard lock(mu_);
  return change_locked(Kind::kPdb, ns + "/" + name, change);
}

std::string FakeApiServer::delete_pdb(const std::string& ns, const std::string& name) {
  std::lock_guard lock(mu_);
  return remove_locked(Kind::kPdb, ns + "/" + name);
}

}  // namespace gapless::test
