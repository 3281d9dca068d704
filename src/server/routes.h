// The extender's routes behind the event loop (http_server.h): which route a request head names,
// where it is answered (on the loop itself, on the reserved probe thread, or on a worker), and
// the answers. Handlers never see a socket: they get a complete Request and hand an Answer to a
// Reply, at once or later from any thread (deferred answers, /bind). Private to the server.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "body_budget.h"
#include "gapless/server/extender.h"
#include "gapless/server/http_server.h"
#include "http_exchange.h"

namespace gapless::server {

struct Route {
  enum class Lane {
    kNone,    // no such route: 404
    kLoop,    // /healthz, /readyz: answered by the event loop itself, never queued
    kProbe,   // /metrics: the reserved probe thread, never the workers
    kDebug,   // /debug/*, /ui/*: one thread of their own, so their work never queues ahead of
              // the verbs (32 pipelined 60k-node explains once held every worker)
    kWorker,  // everything else
  };
  Lane lane = Lane::kNone;
  std::string name;   // for metrics: "filter", ..., or the path
  bool verb = false;  // answers HTTP 200 with an Error, whatever fails (kube-scheduler's rule)
  bool takes_body = false;
  bool deferred = false;  // may answer later than its worker returns (bounded: deferred_timeout)
};

class Routes {
 public:
  Routes(Extender& extender, const HttpOptions& options);

  Route find(const std::string& method, const std::string& path) const;

  // Answers a kLoop route at once.
  Answer answer_now(const Route& route) const;
  // Answers a kProbe or kWorker route through `reply`, exactly once; runs on a worker (or the
  // probe thread). A deferred route may call `reply` after it returned.
  void handle(const Route& route, Request request, Reply reply);

  // Why the request cannot be served, as the route's kind answers it: a verb with 200 and an
  // Error, anything else with `status`. Always closes the connection.
  Answer refusal(const Route& route, int status, const std::string& why) const;
  // The answer when every worker is busy and the queue is full (counted).
  Answer overloaded(const Route& route) const;

  std::string too_large_message() const;
  // A request over BodyBudget::kSmallBody (body or answer) is done and freed: freed heap goes
  // back to the system soon (BodyBudget::note_freed). Any thread.
  void note_large_request_freed() { body_budget_.note_freed(); }

 private:
  Answer verb_answer(const std::string& route, std::string json) const;
  void bind(std::string body, Reply reply);
  std::string explain(std::string& body) const;

  Extender& extender_;
  const HttpOptions& options_;
  BodyBudget body_budget_;
};

std::string error_json(const std::string& message);

}  // namespace gapless::server
