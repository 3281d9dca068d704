// The fake API server's service proxy: /api/v1/namespaces/{ns}/services/{name}:{port}/proxy/...
// forwarded to a URL a test registered, so clients that reach the extender through the API
// server (kubectl-gapless) can be tested end to end.
#include <httplib.h>

#include "fake_api_internal.h"
#include "fake_api_server.h"

namespace gapless::test {

void FakeApiServer::proxy_service(const std::string& ns, const std::string& service_port,
                                  std::string url) {
  std::lock_guard lock(mu_);
  proxies_[ns + "/" + service_port] = std::move(url);
}

void FakeApiServer::handle_service_proxy(const httplib::Request& req, httplib::Response& res) {
  const std::string key = std::string(req.matches[1]) + "/" + std::string(req.matches[2]);
  std::string url;
  {
    std::lock_guard lock(mu_);
    if (auto it = proxies_.find(key); it != proxies_.end()) url = it->second;
  }
  if (url.empty()) {
    // What the real API server answers for a Service without ready endpoints.
    return send_json(res, 503,
                     failure_status(503, "no endpoints available for service \"" +
                                             std::string(req.matches[2]) + "\""));
  }
  httplib::Client client(url);
  client.set_connection_timeout(5);
  client.set_read_timeout(30);
  const std::string path = req.matches[3];
  auto out = req.method == "GET"
                 ? client.Get(path)
                 : client.Post(path, req.body, req.get_header_value("Content-Type"));
  if (!out) {
    return send_json(
        res, 503,
        failure_status(503, "error trying to reach service: " + httplib::to_string(out.error())));
  }
  res.status = out->status;
  res.set_content(out->body, out->get_header_value("Content-Type"));
}

}  // namespace gapless::test
