// What the door (door.h) asks of the routes behind it: which route a request head names, where
// it is answered (on the event loop itself, on the reserved probe thread, on the debug thread or
// on a worker), and the answers. Handlers never see a socket: they get a complete Request and
// hand an Answer to a Reply, at once or later from any thread (deferred answers, the extender's
// /bind). The extender's full table is server/routes.h; the probes alone are probe_routes.h.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace gapless::door {

// A complete request: head parsed, body fully read and decoded (chunked included) by the loop.
struct Request {
  std::string method;  // "GET", "POST", ...
  std::string path;    // the target without its query
  std::string body;
};

struct Answer {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  // Closes the connection after this answer, whatever the client asked (refusals, overload).
  bool close = false;
  std::vector<std::pair<std::string, std::string>> headers;  // extra ones (Retry-After)
};

// How a route hands its answer back. Callable from any thread; call it exactly once. The
// connection waits for it without holding a worker (deferred answers, e.g. bind).
using Reply = std::function<void(Answer)>;

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

// Borrowed by the door, which calls it from the loop (find, answer_now, refusal, overloaded)
// and from its threads (handle, note_large_request_freed): thread-safe.
class RouteTable {
 public:
  virtual ~RouteTable() = default;

  virtual Route find(const std::string& method, const std::string& path) const = 0;
  // Answers a kLoop route at once.
  virtual Answer answer_now(const Route& route) const = 0;
  // Answers a kProbe, kDebug or kWorker route through `reply`, exactly once; runs on a thread of
  // the door. A deferred route may call `reply` after it returned.
  virtual void handle(const Route& route, Request request, Reply reply) = 0;
  // Why the request cannot be served, as the route's kind answers it (e.g. a verb with 200 and
  // an Error, anything else with `status`). Always closes the connection.
  virtual Answer refusal(const Route& route, int status, const std::string& why) const = 0;
  // The answer when the route's lane is busy and its queue full (counted).
  virtual Answer overloaded(const Route& route) const = 0;
  // A request over BodyBudget::kSmallBody (body or answer) is done and freed. Any thread.
  virtual void note_large_request_freed() {}
};

// {"Error": message} (invalid UTF-8 replaced).
std::string error_json(const std::string& message);
Answer json_answer(int status, std::string body, bool close = false);
Answer text_answer(int status, std::string text);

}  // namespace gapless::door
