// The extender's HTTP front: one cpp-httplib server, one port, for the extender verbs
// (POST <prefix>/filter, /prioritize, /bind, /preempt) and the operational routes
// (GET /healthz, /readyz, /version, /metrics, /debug/state).
//
// Extender verbs always answer HTTP 200 (kube-scheduler discards non-200 bodies); failures,
// including bodies over the size limit, travel in the "Error" field. Other routes use 4xx.
#pragma once

#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "gapless/model/result.h"
#include "gapless/server/extender.h"

namespace httplib {
class Server;
}

namespace gapless::server {

struct HttpOptions {
  std::string url_prefix;                        // "" or "/gpu"; trailing '/' ignored
  std::size_t max_body_bytes = 16 * 1024 * 1024; // full-mode NodeLists reach several MB
  std::function<bool()> ready;                   // /readyz; null = always ready
};

// Normalizes a --url-prefix value: "" stays "", "gpu/" becomes "/gpu".
std::string normalize_prefix(std::string prefix);

class HttpServer {
 public:
  HttpServer(Extender& extender, HttpOptions options);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds host:port; port 0 picks a free port. Returns the bound port.
  Result<int> bind(const std::string& host, int port);
  // Serves until stop() is called; returns at once if stop() came first. REQUIRES: bind()
  // succeeded.
  void serve();
  // Safe from any thread, also before serve() starts or after it returned.
  void stop();

 private:
  void install_routes();

  Extender& extender_;
  HttpOptions options_;
  std::unique_ptr<httplib::Server> server_;
  // httplib ignores stop() until its accept loop runs; these make an early stop() stick.
  std::atomic<bool> stop_requested_{false};
  std::atomic<bool> serve_entered_{false};
  std::atomic<bool> serve_returned_{false};
};

}  // namespace gapless::server
