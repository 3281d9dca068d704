// Test fixture for the serving layer itself (TLS, limits, overload): a real HttpServer built
// from any HttpOptions, on 127.0.0.1 and an ephemeral port, serving on its own thread. Unlike
// TestServer it does not probe the server with a plain-HTTP client, so it also serves HTTPS and
// mutual TLS; overload answers are counted in its own Metrics.
#pragma once

#include <dirent.h>
#include <httplib.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>

#include "eventually.h"
#include "test_server.h"

namespace gapless::test {

class LiveServer {
 public:
  // `probe_listener`: also a probe listener (HttpServer::bind_probes) on its own port.
  explicit LiveServer(server::HttpOptions options, model::Cluster cluster = demo_cluster(),
                      bool probe_listener = false)
      : extender_(std::move(cluster), placement::builtin_policy(), binder_, metrics_),
        http_(extender_, with_metrics(std::move(options), &metrics_)) {
    auto bound = http_.bind("127.0.0.1", 0);
    if (!bound) throw std::runtime_error(bound.error());
    port_ = *bound;
    if (probe_listener) {
      auto probes = http_.bind_probes("127.0.0.1", 0);
      if (!probes) throw std::runtime_error(probes.error());
      probe_port_ = *probes;
    }
    // The listening socket queues connections until the accept loop runs, and stop() waits
    // for that loop if serve() has begun: no start-up probe needed.
    thread_ = std::thread([this] { http_.serve(); });
  }
  ~LiveServer() {
    http_.stop();
    thread_.join();
  }
  LiveServer(const LiveServer&) = delete;
  LiveServer& operator=(const LiveServer&) = delete;

  int port() const { return port_; }
  int probe_port() const { return probe_port_; }  // 0 without a probe listener
  server::HttpServer& http() { return http_; }
  server::Metrics& metrics() { return metrics_; }
  // How many connections the door cut for `reason` (gapless_http_connections_cut_total), 0
  // before the first.
  double connections_cut(const std::string& reason) {
    const std::string text = metrics_.serialize();
    const std::string key = "gapless_http_connections_cut_total{reason=\"" + reason + "\"} ";
    const auto at = text.find(key);
    return at == std::string::npos ? 0 : std::stod(text.substr(at + key.size()));
  }
  server::InMemoryBinder& binder() { return binder_; }

  // A plain-HTTP client with generous timeouts (sanitizer builds are slow).
  httplib::Client client() const {
    httplib::Client c("127.0.0.1", port_);
    c.set_connection_timeout(10);
    c.set_read_timeout(30);
    c.set_write_timeout(30);
    return c;
  }

  // The bind() error these options give, or "" if they bind.
  static std::string bind_error(server::HttpOptions options) {
    server::Metrics metrics;
    server::InMemoryBinder binder;
    server::Extender extender(cluster_of(json::array({gfd_node("n", 1)})),
                              placement::builtin_policy(), binder, metrics);
    server::HttpServer http(extender, std::move(options));
    auto bound = http.bind("127.0.0.1", 0);
    return bound ? "" : bound.error();
  }

 private:
  static server::HttpOptions with_metrics(server::HttpOptions o, server::Metrics* m) {
    o.metrics = m;
    return o;
  }

  server::Metrics metrics_;
  server::InMemoryBinder binder_;
  server::Extender extender_;
  server::HttpServer http_;
  int port_ = 0;
  int probe_port_ = 0;
  std::thread thread_;
};

// Open file descriptors of this process (leak checks).
inline int open_fds() {
  int n = 0;
  if (DIR* d = opendir("/proc/self/fd")) {
    while (readdir(d) != nullptr) ++n;
    closedir(d);
  }
  return n;
}

}  // namespace gapless::test
