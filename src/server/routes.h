// The extender's routes behind its door (http_server.h, gapless/door/route_table.h): the verbs,
// /debug/*, /ui/*, and the probe routes (door::ProbeRoutes: /healthz, /readyz, /metrics,
// /version). Private to the server.
#pragma once

#include <cstddef>
#include <string>

#include "gapless/door/body_budget.h"
#include "gapless/door/probe_routes.h"
#include "gapless/door/route_table.h"
#include "gapless/server/extender.h"
#include "gapless/server/http_server.h"

namespace gapless::server {

using door::Answer;
using door::BodyBudget;
using door::error_json;
using door::Reply;
using door::Request;
using door::Route;

class Routes : public door::RouteTable {
 public:
  Routes(Extender& extender, const HttpOptions& options);

  Route find(const std::string& method, const std::string& path) const override;
  Answer answer_now(const Route& route) const override;
  void handle(const Route& route, Request request, Reply reply) override;
  // A verb answers 200 with an Error, anything else `status`.
  Answer refusal(const Route& route, int status, const std::string& why) const override;
  Answer overloaded(const Route& route) const override;

  std::string too_large_message() const;
  // Freed heap goes back to the system soon (BodyBudget::note_freed).
  void note_large_request_freed() override { body_budget_.note_freed(); }

 private:
  Answer verb_answer(const std::string& route, std::string json) const;
  void bind(std::string body, Reply reply);
  std::string explain(std::string& body) const;

  Extender& extender_;
  const HttpOptions& options_;
  door::ProbeRoutes probes_;
  BodyBudget body_budget_;
};

}  // namespace gapless::server
