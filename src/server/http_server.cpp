#include "gapless/server/http_server.h"

#include <httplib.h>
#include <sys/socket.h>

#include <array>
#include <memory>
#include <nlohmann/json.hpp>
#include <thread>

namespace gapless::server {

namespace {

constexpr const char* kJson = "application/json";

struct Verb {
  const char* name;
  std::string (Extender::*handle)(std::string_view);
};
const std::array<Verb, 4> kVerbs = {{{"filter", &Extender::filter},
                                     {"prioritize", &Extender::prioritize},
                                     {"bind", &Extender::bind},
                                     {"preempt", &Extender::preempt}}};

std::string error_json(const std::string& message) {
  return nlohmann::json{{"Error", message}}.dump(-1, ' ', false,
                                                 nlohmann::json::error_handler_t::replace);
}

}  // namespace

std::string normalize_prefix(std::string prefix) {
  while (!prefix.empty() && prefix.back() == '/') prefix.pop_back();
  if (!prefix.empty() && prefix.front() != '/') prefix.insert(prefix.begin(), '/');
  return prefix;
}

HttpServer::HttpServer(Extender& extender, HttpOptions options)
    : extender_(extender), options_(std::move(options)), server_(std::make_unique<httplib::Server>()) {
  options_.url_prefix = normalize_prefix(options_.url_prefix);
  install_routes();
}

HttpServer::~HttpServer() { stop(); }

void HttpServer::install_routes() {
  httplib::Server& s = *server_;
  s.set_payload_max_length(options_.max_body_bytes);
  s.set_read_timeout(30, 0);
  s.set_write_timeout(30, 0);
  // httplib writes a response's headers and body separately; with Nagle's algorithm on, the body
  // waits for the ACK of the headers, which the scheduler's TCP stack delays by up to 40 ms.
  s.set_tcp_nodelay(true);

  const std::string prefix = options_.url_prefix;
  auto is_verb_path = [prefix](const std::string& path) {
    for (const Verb& v : kVerbs) {
      if (path == prefix + "/" + v.name) return true;
    }
    return false;
  };

  for (const Verb& v : kVerbs) {
    auto handle = v.handle;
    s.Post(prefix + "/" + v.name, [this, handle](const httplib::Request& req, httplib::Response& res) {
      res.set_content((extender_.*handle)(req.body), kJson);
    });
  }
  s.Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("ok\n", "text/plain");
  });
  s.Get("/readyz", [this](const httplib::Request&, httplib::Response& res) {
    const bool ready = !options_.ready || options_.ready();
    res.status = ready ? 200 : 503;
    res.set_content(ready ? "ok\n" : "not ready\n", "text/plain");
  });
  s.Get("/version", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(nlohmann::json{{"name", "gapless-extender"}, {"version", GAPLESS_VERSION}}.dump(),
                    kJson);
  });
  s.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(extender_.metrics_text(), "text/plain; version=0.0.4");
  });
  s.Get("/debug/state", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(extender_.debug_state(), kJson);
  });

  // Oversized bodies (413, rejected before our handler runs) and unknown routes end up here.
  // On an extender verb the answer must still be 200 with Error, or kube-scheduler never sees why.
  const std::size_t limit = options_.max_body_bytes;
  s.set_error_handler(httplib::Server::HandlerWithResponse([is_verb_path, limit](
                                                 const httplib::Request& req,
                                                 httplib::Response& res) {
    if (req.method == "POST" && is_verb_path(req.path)) {
      const std::string why = res.status == 413
                                  ? "request body exceeds the limit of " + std::to_string(limit) +
                                        " bytes (--max-body-bytes)"
                                  : "request failed with HTTP " + std::to_string(res.status);
      res.status = 200;
      res.set_content(error_json(why), kJson);
      return httplib::Server::HandlerResponse::Handled;
    }
    if (res.body.empty()) {
      const std::string why = res.status == 404 ? "no route " + req.method + " " + req.path
                                                : "HTTP " + std::to_string(res.status);
      res.set_content(error_json(why), kJson);
    }
    return httplib::Server::HandlerResponse::Handled;
  }));
  s.set_exception_handler([is_verb_path](const httplib::Request& req, httplib::Response& res,
                                         std::exception_ptr ep) {
    std::string what = "internal error";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = std::string("internal error: ") + e.what();
    } catch (...) {
    }
    res.status = is_verb_path(req.path) ? 200 : 500;
    res.set_content(error_json(what), kJson);
  });
}

Result<int> HttpServer::bind(const std::string& host, int port) {
  // httplib's default options set SO_REUSEPORT, which lets a second extender bind the same port
  // and silently take half the calls with its own model; SO_REUSEADDR only allows restarts.
  // httplib also listens with a backlog of 5: a burst of new connections overflows it and the
  // kernel resets some of them. So note the listening socket and raise its backlog once bound.
  auto listening = std::make_shared<socket_t>(INVALID_SOCKET);
  server_->set_socket_options([listening](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    *listening = sock;
  });
  const int bound = port == 0 ? server_->bind_to_any_port(host) : (server_->bind_to_port(host, port) ? port : -1);
  if (bound < 0) return Error{"cannot listen on " + host + ":" + std::to_string(port)};
  if (*listening != INVALID_SOCKET) ::listen(*listening, SOMAXCONN);  // only updates the backlog
  return bound;
}

void HttpServer::serve() {
  serve_entered_ = true;
  if (!stop_requested_) server_->listen_after_bind();
  serve_returned_ = true;
}

void HttpServer::stop() {
  stop_requested_ = true;
  if (!server_) return;
  // serve() may have passed its check without httplib's accept loop running yet, and
  // httplib::Server::stop() does nothing until it does: wait for one or the other.
  while (serve_entered_ && !serve_returned_ && !server_->is_running()) std::this_thread::yield();
  server_->stop();
}

}  // namespace gapless::server
