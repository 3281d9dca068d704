// The agent's HTTP port: GET /healthz ("ok" while the process runs: a node without NVML is a
// healthy agent with nothing to publish) and GET /metrics (AgentMetrics).
//
// Ownership: borrows the metrics, which must outlive the server; owns its listening thread.
// Thread-safety: start and stop from one thread; requests are served concurrently.
#pragma once

#include <memory>
#include <string>
#include <thread>

#include "gapless/agent/metrics.h"
#include "gapless/model/result.h"

namespace httplib {
class Server;
}

namespace gapless::agent {

class StatusServer {
 public:
  explicit StatusServer(const AgentMetrics& metrics);
  ~StatusServer();  // stops
  StatusServer(const StatusServer&) = delete;
  StatusServer& operator=(const StatusServer&) = delete;

  // Binds `listen` ("HOST:PORT"; port 0 picks a free one) and serves in the background.
  Status start(const std::string& listen);
  int port() const { return port_; }
  void stop();

 private:
  const AgentMetrics& metrics_;
  std::unique_ptr<httplib::Server> http_;
  std::thread thread_;
  int port_ = 0;
};

}  // namespace gapless::agent
