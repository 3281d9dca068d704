#include "gapless/agent/status_server.h"

#include <charconv>
#include <chrono>
#include <utility>

namespace gapless::agent {

door::DoorOptions StatusServer::default_options() {
  door::DoorOptions o;
  o.workers = 1;
  o.max_queue = door::Door::kProbeQueue;
  o.max_body_bytes = 64 * 1024;    // no route takes one
  o.max_header_bytes = 16 * 1024;  // the kubelet's and Prometheus's heads are far below 1 KiB
  // A kept connection idle for 10 s or a request not whole in 5 s gives its slot back: the
  // kubelet opens a new connection per probe, Prometheus reconnects.
  o.read_timeout = std::chrono::seconds(10);
  o.request_timeout = std::chrono::seconds(5);
  o.write_timeout = std::chrono::seconds(10);
  // One client (a pod) holds at most 64 connections; the kubelet probes from the node's address.
  o.max_connections = 1024;
  o.max_connections_per_peer = 64;
  return o;
}

namespace {

door::DoorOptions counted_by(door::DoorOptions options, AgentMetrics& metrics) {
  options.metrics = &metrics;
  return options;
}

}  // namespace

StatusServer::StatusServer(AgentMetrics& metrics, door::DoorOptions options)
    : routes_(
          "gapless-agent", [&metrics] { return metrics.serialize(); }, nullptr, &metrics),
      door_(routes_, counted_by(std::move(options), metrics)) {}

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
  Result<int> bound = door_.bind(host, port);
  if (!bound) return Error{bound.error()};
  port_ = *bound;
  thread_ = std::thread([this] { door_.run(); });
  return Status::Ok();
}

void StatusServer::stop() {
  door_.stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace gapless::agent
