// The fake API server's Leases (coordination.k8s.io/v1): what a test stores with set_lease,
// served by GET (the extender reads kube-scheduler's leader lease; it never writes one).
#include <httplib.h>

#include "fake_api_internal.h"
#include "fake_api_server.h"

namespace gapless::test {

using nlohmann::json;

void FakeApiServer::set_lease(const std::string& ns, const std::string& name,
                              const std::string& holder) {
  std::lock_guard lock(mu_);
  leases_[ns + "/" + name] = json{{"kind", "Lease"},
                                  {"apiVersion", "coordination.k8s.io/v1"},
                                  {"metadata", {{"namespace", ns}, {"name", name}}},
                                  {"spec", {{"holderIdentity", holder}}}};
}

void FakeApiServer::add_lease_routes() {
  http_->Get(R"(/apis/coordination.k8s.io/v1/namespaces/([^/]+)/leases/([^/]+))",
             [this](const httplib::Request& req, httplib::Response& res) {
               if (pre_route(req, res)) return;
               std::lock_guard lock(mu_);
               auto it =
                   leases_.find(std::string(req.matches[1]) + "/" + std::string(req.matches[2]));
               if (it != leases_.end()) return send_json(res, 200, it->second);
               send_json(res, 404,
                         failure_status(404, "leases.coordination.k8s.io \"" +
                                                 std::string(req.matches[2]) + "\" not found"));
             });
}

}  // namespace gapless::test
