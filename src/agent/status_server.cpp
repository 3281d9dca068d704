#include "gapless/agent/status_server.h"

#include <httplib.h>

#include <charconv>

namespace gapless::agent {

StatusServer::StatusServer(const AgentMetrics& metrics)
    : metrics_(metrics), http_(std::make_unique<httplib::Server>()) {
  http_->Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("ok\n", "text/plain");
  });
  http_->Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics_.serialize(), "text/plain; version=0.0.4");
  });
}

StatusServer::~StatusServer() {
  stop();
}

Status StatusServer::start(const std::string& listen) {
  const std::size_t colon = listen.rfind(':');
  int port = -1;
  if (colon != std::string::npos) {
    const char* begin = listen.data() + colon + 1;
    const char* end = listen.data() + listen.size();
    auto [ptr, ec] = std::from_chars(begin, end, port);
    if (ec != std::errc() || ptr != end) port = -1;
  }
  if (colon == std::string::npos || colon == 0 || port < 0 || port > 65535) {
    return Error{"--listen \"" + listen + "\": must be HOST:PORT"};
  }
  std::string host = listen.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  port_ = port == 0 ? http_->bind_to_any_port(host) : (http_->bind_to_port(host, port) ? port : -1);
  if (port_ <= 0) return Error{"cannot listen on " + listen};
  thread_ = std::thread([this] { http_->listen_after_bind(); });
  return Status::Ok();
}

void StatusServer::stop() {
  if (!thread_.joinable()) return;
  http_->stop();
  thread_.join();
}

}  // namespace gapless::agent
