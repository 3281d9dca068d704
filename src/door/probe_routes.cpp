#include "gapless/door/probe_routes.h"

#include <nlohmann/json.hpp>
#include <utility>

namespace gapless::door {

std::string error_json(const std::string& message) {
  return nlohmann::json{{"Error", message}}.dump(-1, ' ', false,
                                                 nlohmann::json::error_handler_t::replace);
}

Answer json_answer(int status, std::string body, bool close) {
  Answer a;
  a.status = status;
  a.content_type = "application/json";
  a.body = std::move(body);
  a.close = close;
  return a;
}

Answer text_answer(int status, std::string text) {
  Answer a;
  a.status = status;
  a.content_type = "text/plain";
  a.body = std::move(text);
  return a;
}

ProbeRoutes::ProbeRoutes(std::string name, std::function<std::string()> metrics,
                         std::function<bool()> ready, DoorCounters* counters)
    : name_(std::move(name)),
      metrics_(std::move(metrics)),
      ready_(std::move(ready)),
      counters_(counters) {}

Route ProbeRoutes::find(const std::string& method, const std::string& path) const {
  Route r;
  if (method != "GET") return r;
  if (path == "/healthz" || path == "/readyz") r = {Route::Lane::kLoop, path, false, false, false};
  if (path == "/metrics") r = {Route::Lane::kProbe, path, false, false, false};
  if (path == "/version") r = {Route::Lane::kWorker, path, false, false, false};
  return r;
}

Answer ProbeRoutes::answer_now(const Route& route) const {
  if (route.name == "/readyz" && ready_ && !ready_()) return text_answer(503, "not ready\n");
  return text_answer(200, "ok\n");
}

void ProbeRoutes::handle(const Route& route, Request, Reply reply) {
  if (route.name == "/metrics") {
    Answer a = text_answer(200, metrics_());
    a.content_type = "text/plain; version=0.0.4";
    return reply(std::move(a));
  }
  reply(json_answer(200, nlohmann::json{{"name", name_}, {"version", GAPLESS_VERSION}}.dump()));
}

Answer ProbeRoutes::refusal(const Route&, int status, const std::string& why) const {
  return json_answer(status, error_json(why), true);
}

Answer ProbeRoutes::overloaded(const Route& route) const {
  if (counters_ != nullptr) counters_->count_overload(route.name);
  Answer a =
      json_answer(503, error_json("overloaded: too many requests wait; retry shortly"), true);
  a.headers.emplace_back("Retry-After", "1");
  return a;
}

}  // namespace gapless::door
