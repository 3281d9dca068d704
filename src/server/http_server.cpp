#include "gapless/server/http_server.h"

#include <thread>
#include <utility>

#include "gapless/door/probe_routes.h"
#include "routes.h"

namespace gapless::server {

std::string normalize_prefix(std::string prefix) {
  while (!prefix.empty() && prefix.back() == '/') prefix.pop_back();
  if (!prefix.empty() && prefix.front() != '/') prefix.insert(prefix.begin(), '/');
  return prefix;
}

namespace {

// The probe listener's door: the main listener's bounds, plain HTTP. Its one worker answers
// /version (the loop answers /healthz and /readyz, the probe thread /metrics); no route there
// takes a body.
door::DoorOptions probe_listener_options(door::DoorOptions o) {
  o.tls_cert_file.clear();
  o.tls_key_file.clear();
  o.client_ca_file.clear();
  o.workers = 1;
  o.max_queue = door::Door::kProbeQueue;
  return o;
}

}  // namespace

HttpServer::HttpServer(Extender& extender, HttpOptions options)
    : extender_(extender), options_(std::move(options)) {
  options_.url_prefix = normalize_prefix(options_.url_prefix);
  routes_ = std::make_unique<Routes>(extender_, options_);
  door_ = std::make_unique<door::Door>(*routes_, options_);
}

HttpServer::~HttpServer() {
  stop();
}

std::size_t HttpServer::queued_connections() const {
  return door_->queued_connections();
}
std::size_t HttpServer::busy_workers() const {
  return door_->busy_workers();
}

Result<int> HttpServer::bind(const std::string& host, int port) {
  return door_->bind(host, port);
}

Result<int> HttpServer::bind_probes(const std::string& host, int port) {
  if (!door_->setup()) return Error{door_->setup().error()};
  if (!probe_routes_) {
    probe_routes_ = std::make_unique<door::ProbeRoutes>(
        "gapless-extender", [&extender = extender_] { return extender.metrics_text(); },
        options_.ready, options_.metrics);
  }
  auto probe_door = std::make_unique<door::Door>(*probe_routes_, probe_listener_options(options_));
  auto bound = probe_door->bind(host, port);
  if (bound) probe_door_ = std::move(probe_door);
  return bound;
}

void HttpServer::serve() {
  if (stop_requested_ || !door_->setup() || !door_->bound()) return;
  std::thread probe_loop;
  if (probe_door_) probe_loop = std::thread([d = probe_door_.get()] { d->run(); });
  door_->run();
  if (probe_loop.joinable()) {
    stop();  // a no-op after stop(); else (the main loop failed) the probe loop ends too
    probe_loop.join();
  }
}

void HttpServer::stop() {
  if (stop_requested_.exchange(true)) return;
  door_->stop();
  if (probe_door_) probe_door_->stop();
}

}  // namespace gapless::server
