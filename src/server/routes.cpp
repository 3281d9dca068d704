#include "routes.h"

#include <array>
#include <nlohmann/json.hpp>
#include <optional>
#include <utility>

#include "args_reader.h"
#include "ui_routes.h"

namespace gapless::server {
namespace {

using door::json_answer;

// The verbs' answers. (cpp-httplib gzipped exact "application/json" answers when kube-scheduler
// asked for it; the charset parameter kept that off and is kept so the wire stays the same.)
constexpr const char* kVerbJson = "application/json; charset=utf-8";
constexpr const char* kExplainPath = "/debug/explain";
// What /debug/explain writes per node at least, besides the node's name (an unknown node's
// verdict, measured: 60,000 unknown names made 4 MB). Used to refuse before computing an
// answer that could not be sent.
constexpr std::size_t kExplainBytesPerNode = 48;

struct Verb {
  const char* name;
  std::string (*handle)(Extender&, const std::string& body, std::size_t answer_limit);
};
// filter and prioritize take the std::string itself: the loop's body has room behind it
// (kParsePadding) for the JSON reader to parse it in place. They also take --max-answer-bytes,
// to refuse an answer too large before building it (a 1.2M-name filter built 68 MB first).
const std::array<Verb, 3> kSyncVerbs = {
    {{"filter",
      [](Extender& e, const std::string& b, std::size_t limit) { return e.filter(b, limit); }},
     {"prioritize",
      [](Extender& e, const std::string& b, std::size_t limit) { return e.prioritize(b, limit); }},
     {"preempt", [](Extender& e, const std::string& b, std::size_t) { return e.preempt(b); }}}};

}  // namespace

Routes::Routes(Extender& extender, const HttpOptions& options)
    : extender_(extender),
      options_(options),
      probes_(
          "gapless-extender", [&extender] { return extender.metrics_text(); }, options.ready,
          options.metrics),
      body_budget_(options.max_body_bytes) {}

Route Routes::find(const std::string& method, const std::string& path) const {
  Route r = probes_.find(method, path);
  if (r.lane != Route::Lane::kNone) return r;
  if (method == "POST") {
    for (const char* v : {"filter", "prioritize", "bind", "preempt"}) {
      if (path == options_.url_prefix + "/" + v) {
        r = {Route::Lane::kWorker, v, true, true, std::string(v) == "bind"};
      }
    }
    if (path == kExplainPath) r = {Route::Lane::kDebug, "explain", true, true, false};
    return r;
  }
  if (method != "GET") return r;
  if (path == "/debug/state") r = {Route::Lane::kDebug, path, false, false, false};
  // The GPU map (ui_routes.h, docs/gpu-map.md): its routes are one transport-free function.
  if (is_ui_path(path)) r = {Route::Lane::kDebug, "ui", false, false, false};
  return r;
}

Answer Routes::answer_now(const Route& route) const {
  return probes_.answer_now(route);
}

std::string Routes::too_large_message() const {
  return "request body exceeds the limit of " + std::to_string(options_.max_body_bytes) +
         " bytes (--max-body-bytes)";
}

Answer Routes::refusal(const Route& route, int status, const std::string& why) const {
  return json_answer(route.verb ? 200 : status, error_json(why), true);
}

Answer Routes::overloaded(const Route& route) const {
  if (options_.metrics != nullptr) options_.metrics->count_overload(route.name);
  const std::string why = "overloaded: all " + std::to_string(options_.workers) +
                          " workers are busy and " + std::to_string(options_.max_queue) +
                          " requests already wait for one (--workers, --max-queue); retry shortly";
  if (route.verb) {
    // kube-scheduler reads only 200 bodies; filter's answer keeps ExtenderFilterResult's keys.
    nlohmann::json out = {{"Error", why}};
    if (route.name == "filter") {
      out.update({{"Nodes", nullptr},
                  {"NodeNames", nullptr},
                  {"FailedNodes", nullptr},
                  {"FailedAndUnresolvableNodes", nullptr}});
    }
    return json_answer(200, out.dump(), true);
  }
  Answer a = json_answer(503, error_json(why), true);
  a.headers.emplace_back("Retry-After", "1");
  return a;
}

// An answer over --max-answer-bytes is not sent: its client gets why instead (the loop would
// otherwise hold it for a slow reader).
Answer Routes::verb_answer(const std::string& route, std::string json) const {
  if (json.size() > options_.max_answer_bytes) {
    if (options_.metrics != nullptr) options_.metrics->count_overload(route);
    json = error_json("answer of " + std::to_string(json.size()) + " bytes exceeds the limit of " +
                      std::to_string(options_.max_answer_bytes) + " bytes (--max-answer-bytes)");
  }
  Answer a = json_answer(200, std::move(json));
  a.content_type = kVerbJson;
  return a;
}

void Routes::handle(const Route& route, Request request, Reply reply) {
  if (options_.before_handler) options_.before_handler(request.path);
  if (!route.verb) {
    if (route.name == "/metrics" || route.name == "/version") {
      return probes_.handle(route, std::move(request), std::move(reply));
    }
    if (route.name == "ui") {
      UiAnswer ui = ui_answer(extender_, request.path);
      Answer a = json_answer(ui.status, std::move(ui.body));
      a.content_type = ui.content_type;
      if (!ui.location.empty()) a.headers.emplace_back("Location", ui.location);
      a.headers.emplace_back("Cache-Control", "no-store");
      return reply(std::move(a));
    }
    return reply(json_answer(200, extender_.debug_state()));  // /debug/state
  }
  // A large body leases its size from the body budget (body_budget.h) before it is parsed,
  // until the answer is made.
  const BodyBudget::Lease held =
      body_budget_.acquire(request.body.size(), options_.request_timeout);
  if (!held.granted()) {
    if (options_.metrics != nullptr) options_.metrics->count_overload(route.name);
    return reply(refusal(route, 503,
                         "overloaded: large request bodies already being handled fill the memory "
                         "budget of " +
                             std::to_string(body_budget_.capacity()) +
                             " bytes (2 x --max-body-bytes) for --request-timeout; retry shortly"));
  }
  request.body.reserve(request.body.size() + kParsePadding);
  if (route.name == "bind") return bind(std::move(request.body), std::move(reply));
  if (route.name == "explain") return reply(verb_answer("explain", explain(request.body)));
  for (const Verb& v : kSyncVerbs) {
    if (route.name == v.name) {
      return reply(
          verb_answer(v.name, v.handle(extender_, request.body, options_.max_answer_bytes)));
    }
  }
}

// ---------------------------------------------------------------------------------------------
// THE place where /bind is wired. A deferred route: `reply` may be called after this returns,
// from any thread, exactly once; the connection waits for it (at most --deferred-timeout)
// holding no worker. HttpOptions::bind_async when set (tests), else Extender::bind_async, which
// parks a bind behind the node-pairing gate (docs/node-pairing.md) and answers when it opens.
void Routes::bind(std::string body, Reply reply) {
  auto done = [this, reply = std::move(reply)](std::string answer) {
    reply(verb_answer("bind", std::move(answer)));
  };
  if (options_.bind_async) return options_.bind_async(std::move(body), std::move(done));
  extender_.bind_async(std::move(body), std::move(done));
}
// ---------------------------------------------------------------------------------------------

// Refuses before computing when the answer could not be sent anyway: at least
// kExplainBytesPerNode plus the name per node (1M names made a 64 MB answer, 56 s of work).
std::string Routes::explain(std::string& body) const {
  if (std::optional<wire::ReadArgs> args = wire::read_extender_args(body, body.capacity())) {
    std::size_t estimate = 0;
    for (const std::string& n : args->names) estimate += n.size() + kExplainBytesPerNode;
    if (estimate > options_.max_answer_bytes) {
      return error_json("an explanation of " + std::to_string(args->names.size()) +
                        " nodes would exceed the answer limit of " +
                        std::to_string(options_.max_answer_bytes) +
                        " bytes (--max-answer-bytes); ask for fewer nodes");
    }
  }
  return extender_.explain(body);
}

}  // namespace gapless::server
