#include "gapless/server/http_server.h"

#include <httplib.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <sys/socket.h>

#include <array>
#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>
#include <vector>

#include "body_budget.h"
#include "front_door.h"
#include "plain_connection.h"
#include "ui_routes.h"

namespace gapless::server {

namespace {

constexpr const char* kJson = "application/json";
// The verbs' answers: JSON that httplib does not gzip. kube-scheduler's Go client asks for gzip
// on every call (Accept-Encoding), and httplib compresses "application/json" when asked: a
// zlib stream set up per answer, and for a full-node answer megabytes deflated, to cross a
// loopback (measured through a real kube-scheduler: README). httplib compresses only exact
// content types it knows, so the charset parameter, which JSON readers ignore, keeps it off.
constexpr const char* kVerbJson = "application/json; charset=utf-8";

struct Verb {
  const char* name;
  std::string (*handle)(Extender&, const std::string&);
};
// filter and prioritize take the std::string itself: read_body leaves room behind it for the
// JSON reader to parse it in place.
const std::array<Verb, 4> kVerbs = {
    {{"filter", [](Extender& e, const std::string& b) { return e.filter(b); }},
     {"prioritize", [](Extender& e, const std::string& b) { return e.prioritize(b); }},
     {"bind", [](Extender& e, const std::string& b) { return e.bind(b); }},
     {"preempt", [](Extender& e, const std::string& b) { return e.preempt(b); }}}};

// Not under the verbs' URL prefix: a debugging route, like /debug/state.
constexpr const char* kExplainPath = "/debug/explain";

std::string error_json(const std::string& message) {
  return nlohmann::json{{"Error", message}}.dump(-1, ' ', false,
                                                 nlohmann::json::error_handler_t::replace);
}

// The overflow lane's threads (and the accept thread, when it serves a connection itself) set
// this while they run a connection: the route handlers then answer at once (see ConnectionPool).
thread_local bool t_overflow = false;

class OverflowScope {
 public:
  OverflowScope() { t_overflow = true; }
  ~OverflowScope() { t_overflow = false; }
  OverflowScope(const OverflowScope&) = delete;
  OverflowScope& operator=(const OverflowScope&) = delete;
};

// The first queued OpenSSL error as text (and the queue cleared), or "".
std::string openssl_error() {
  const unsigned long code = ERR_get_error();
  ERR_clear_error();
  if (code == 0) return "";
  std::array<char, 256> buf{};
  ERR_error_string_n(code, buf.data(), buf.size());
  return buf.data();
}

Status check_readable(const char* flag, const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) {
    return Error{std::string(flag) + " " + path + ": cannot read: " + std::strerror(errno)};
  }
  std::fclose(f);
  return Status::Ok();
}

// Loads certificate, key and (optionally) the client CA into `ctx`; each failure names its flag
// and file. Plain OpenSSL calls, so every failure is caught (httplib's file constructor ignores
// a bad client CA file and would then refuse every client).
Status setup_tls(SSL_CTX& ctx, const HttpOptions& o) {
  for (auto [flag, path] :
       {std::pair{"--tls-cert", &o.tls_cert_file}, std::pair{"--tls-key", &o.tls_key_file},
        std::pair{"--client-ca", &o.client_ca_file}}) {
    if (path->empty()) continue;
    if (Status s = check_readable(flag, *path); !s) return s;
  }
  ERR_clear_error();
  SSL_CTX_set_min_proto_version(&ctx, TLS1_2_VERSION);
  // Idle connections at the door then hold no TLS record buffers (~34 KiB each).
  SSL_CTX_set_mode(&ctx, SSL_MODE_RELEASE_BUFFERS);
  SSL_CTX_set_options(&ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION |
                                SSL_OP_NO_SESSION_RESUMPTION_ON_RENEGOTIATION);
  if (SSL_CTX_use_certificate_chain_file(&ctx, o.tls_cert_file.c_str()) != 1) {
    return Error{"--tls-cert " + o.tls_cert_file +
                 ": not a PEM certificate (chain): " + openssl_error()};
  }
  if (SSL_CTX_use_PrivateKey_file(&ctx, o.tls_key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
    return Error{"--tls-key " + o.tls_key_file +
                 ": not an unencrypted PEM private key for the certificate in --tls-cert " +
                 o.tls_cert_file + ": " + openssl_error()};
  }
  if (SSL_CTX_check_private_key(&ctx) != 1) {
    return Error{"--tls-key " + o.tls_key_file + ": does not match the certificate in --tls-cert " +
                 o.tls_cert_file + ": " + openssl_error()};
  }
  if (o.client_ca_file.empty()) return Status::Ok();
  if (SSL_CTX_load_verify_locations(&ctx, o.client_ca_file.c_str(), nullptr) != 1) {
    return Error{"--client-ca " + o.client_ca_file +
                 ": no PEM CA certificate in it: " + openssl_error()};
  }
  // Also tell clients which CAs are accepted (Go's TLS client picks its certificate by them).
  STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(o.client_ca_file.c_str());
  if (names == nullptr) {
    return Error{"--client-ca " + o.client_ca_file +
                 ": no PEM CA certificate in it: " + openssl_error()};
  }
  SSL_CTX_set_client_CA_list(&ctx, names);  // takes ownership
  SSL_CTX_set_verify(&ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  ERR_clear_error();
  return Status::Ok();
}

std::string too_large_message(std::size_t limit) {
  return "request body exceeds the limit of " + std::to_string(limit) + " bytes (--max-body-bytes)";
}

// A verb's body, or nullopt after answering why it cannot be had. The verbs read their body
// themselves: the limit then holds for chunked bodies too, and any Content-Type is taken as the
// JSON it should be (httplib would parse a form-urlencoded body and refuse one over 8 KB). The
// overflow lane reads it as well, so that the client reads the answer instead of a reset.
std::optional<std::string> verb_body(const httplib::Request& req,
                                     const httplib::ContentReader& reader, std::size_t limit,
                                     httplib::Response& res) {
  std::string body;
  switch (front_door::read_body(req, reader, limit, &body)) {
    case front_door::BodyRead::kOk:
      return body;
    case front_door::BodyRead::kTooLarge:
      front_door::answer_and_close(res, 200, error_json(too_large_message(limit)), kJson);
      return std::nullopt;
    case front_door::BodyRead::kFailed:
      break;
  }
  front_door::answer_and_close(res, 200,
                               error_json("request body could not be read (malformed chunked "
                                          "encoding, unsupported Content-Encoding or a timeout)"),
                               kJson);
  return std::nullopt;
}

// Answers (and closes) before httplib reads a body, when one must not be read: framing that is
// refused or gives no length, a declared length over the limit (httplib would read and discard all
// of it first, up to the read timeout per read), a multipart body on a verb, or a body sent to any
// route but a verb (only the verbs bound what they read). Returns true if it answered.
bool refuse_early(const httplib::Request& req, httplib::Response& res, bool verb, std::size_t limit,
                  const std::string& too_large) {
  std::string why = front_door::framing_problem(req);
  if (why.empty() && verb && front_door::content_length(req) > limit) why = too_large;
  if (why.empty() && verb && !req.has_header("Content-Length") &&
      !req.has_header("Transfer-Encoding")) {
    // httplib would read such a body until the client closes: a stall, and a pipelined next
    // request taken for body.
    why = "request has neither Content-Length nor Transfer-Encoding: chunked";
  }
  if (why.empty() && verb && req.is_multipart_form_data()) {
    why = "multipart/form-data is not accepted: send the JSON object itself as the body";
  }
  if (!why.empty()) {
    // kube-scheduler reads only 200 bodies; other routes get a plain 400.
    front_door::answer_and_close(res, verb ? 200 : 400, error_json(why), kJson);
    return true;
  }
  if (!verb && front_door::reads_body(req)) {
    front_door::answer_and_close(res, 404, error_json("no route " + req.method + " " + req.path),
                                 kJson);
    return true;
  }
  return false;
}

Status check_options(const HttpOptions& o) {
  if (o.workers == 0) return Error{"--workers must be at least 1"};
  if (o.read_timeout.count() <= 0) return Error{"--read-timeout must be positive"};
  if (o.write_timeout.count() <= 0) return Error{"--write-timeout must be positive"};
  if (o.request_timeout.count() <= 0) return Error{"--request-timeout must be positive"};
  if (o.max_connections == 0) return Error{"--max-connections must be at least 1"};
  if (o.max_connections_per_peer == 0) {
    return Error{"--max-connections-per-peer must be at least 1"};
  }
  if (o.tls_cert_file.empty() != o.tls_key_file.empty()) {
    return Error{"--tls-cert and --tls-key must be given together"};
  }
  if (!o.client_ca_file.empty() && o.tls_cert_file.empty()) {
    return Error{"--client-ca needs --tls-cert and --tls-key"};
  }
  return Status::Ok();
}

}  // namespace

// The bounded pool behind httplib's accept loop (installed through Server::new_task_queue).
//
// The door (plain_connection.h) hands the pool a function that owns a connection with a complete
// request: it answers it (and any pipelined one), then gives the connection back to the door or
// closes it. Every such function must run, or the connection leaks:
//  - Worker lane: `workers` threads; a connection waits in the queue when there are no more
//    idle workers than waiting connections and fewer than `max_queue` wait beyond those.
//  - Overflow lane: otherwise, one of kOverflowThreads threads runs the function with
//    t_overflow set. The handlers then answer without work: health probes normally, extender
//    verbs with {"Error":"overloaded: ..."}, other routes 503, with "Connection: close".
//  - If even the overflow lane's queue is full, the calling thread, the door's, runs the
//    connection itself (t_overflow set), with the request already read, so only the answer's
//    write can take time.
// shutdown() lets every queued connection run (the function sees the server stopping and just
// closes the connection) and joins all threads.
class ConnectionPool {
 public:
  static constexpr std::size_t kOverflowThreads = 2;
  static constexpr std::size_t kOverflowQueue = 128;

  ConnectionPool(std::size_t workers, std::size_t max_queue)
      : workers_(workers), max_queue_(max_queue) {}
  ~ConnectionPool() { shutdown(); }
  ConnectionPool(const ConnectionPool&) = delete;
  ConnectionPool& operator=(const ConnectionPool&) = delete;

  void start() {
    std::lock_guard lock(mu_);
    if (!threads_.empty()) return;
    shutdown_ = false;
    for (std::size_t i = 0; i < workers_; ++i) threads_.emplace_back([this] { work(); });
    for (std::size_t i = 0; i < kOverflowThreads; ++i) {
      threads_.emplace_back([this] { overflow_work(); });
    }
  }

  void enqueue(std::function<void()> fn) {
    std::unique_lock lock(mu_);
    if (jobs_.size() < idle_ + max_queue_) {
      jobs_.push_back(std::move(fn));
      lock.unlock();
      work_cv_.notify_one();
      return;
    }
    if (overflow_.size() < kOverflowQueue) {
      overflow_.push_back(std::move(fn));
      lock.unlock();
      overflow_cv_.notify_one();
      return;
    }
    lock.unlock();
    OverflowScope scope;
    fn();
  }

  void shutdown() {
    std::vector<std::thread> threads;
    {
      std::lock_guard lock(mu_);
      shutdown_ = true;
      threads.swap(threads_);
    }
    work_cv_.notify_all();
    overflow_cv_.notify_all();
    for (std::thread& t : threads) t.join();
  }

  std::size_t queued() const {
    std::lock_guard lock(mu_);
    return jobs_.size();
  }
  std::size_t busy() const {
    std::lock_guard lock(mu_);
    return busy_;
  }
  std::size_t workers() const { return workers_; }
  std::size_t max_queue() const { return max_queue_; }

 private:
  void work() {
    std::unique_lock lock(mu_);
    for (;;) {
      ++idle_;
      work_cv_.wait(lock, [this] { return shutdown_ || !jobs_.empty(); });
      --idle_;
      if (jobs_.empty()) return;  // shut down and drained
      std::function<void()> fn = std::move(jobs_.front());
      jobs_.pop_front();
      ++busy_;
      lock.unlock();
      fn();
      fn = nullptr;
      lock.lock();
      --busy_;
    }
  }

  void overflow_work() {
    OverflowScope scope;
    std::unique_lock lock(mu_);
    for (;;) {
      overflow_cv_.wait(lock, [this] { return shutdown_ || !overflow_.empty(); });
      if (overflow_.empty()) return;
      std::function<void()> fn = std::move(overflow_.front());
      overflow_.pop_front();
      lock.unlock();
      fn();
      fn = nullptr;
      lock.lock();
    }
  }

  const std::size_t workers_;
  const std::size_t max_queue_;
  mutable std::mutex mu_;
  std::condition_variable work_cv_;
  std::condition_variable overflow_cv_;
  std::deque<std::function<void()>> jobs_;
  std::deque<std::function<void()>> overflow_;
  std::size_t idle_ = 0;  // workers waiting for a connection
  std::size_t busy_ = 0;  // workers running one
  bool shutdown_ = false;
  std::vector<std::thread> threads_;
};

namespace {

// What httplib owns and deletes when its accept loop ends; the pool itself stays with the
// HttpServer so its state can be read at any time.
class PoolQueue : public httplib::TaskQueue {
 public:
  explicit PoolQueue(ConnectionPool& pool) : pool_(pool) { pool_.start(); }
  void enqueue(std::function<void()> fn) override { pool_.enqueue(std::move(fn)); }
  void shutdown() override { pool_.shutdown(); }

 private:
  ConnectionPool& pool_;
};

}  // namespace

std::string normalize_prefix(std::string prefix) {
  while (!prefix.empty() && prefix.back() == '/') prefix.pop_back();
  if (!prefix.empty() && prefix.front() != '/') prefix.insert(prefix.begin(), '/');
  return prefix;
}

HttpServer::HttpServer(Extender& extender, HttpOptions options)
    : extender_(extender), options_(std::move(options)), setup_(check_options(options_)) {
  options_.url_prefix = normalize_prefix(options_.url_prefix);
  body_budget_ = std::make_unique<BodyBudget>(options_.max_body_bytes);
  pool_ = std::make_unique<ConnectionPool>(std::max<std::size_t>(options_.workers, 1),
                                           options_.max_queue);
  if (setup_ && tls()) {
    // Our own context, served by the door (plain_connection.h) like plain HTTP.
    SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
    if (ctx == nullptr) {
      setup_ = Error{"cannot create a TLS context: " + openssl_error()};
    } else {
      setup_ = setup_tls(*ctx, options_);
    }
    server_ = std::make_unique<DoorServer>(ctx);
  } else {
    server_ = std::make_unique<DoorServer>();
  }
  install_routes();
}

HttpServer::~HttpServer() {
  stop();
}

std::size_t HttpServer::queued_connections() const {
  return pool_->queued();
}
std::size_t HttpServer::busy_workers() const {
  return pool_->busy();
}

void HttpServer::install_routes() {
  httplib::Server& s = *server_;
  s.set_payload_max_length(options_.max_body_bytes);
  s.set_read_timeout(static_cast<time_t>(options_.read_timeout.count()), 0);
  s.set_write_timeout(static_cast<time_t>(options_.write_timeout.count()), 0);
  // httplib writes a response's headers and body separately; with Nagle's algorithm on, the body
  // waits for the ACK of the headers, which the scheduler's TCP stack delays by up to 40 ms.
  s.set_tcp_nodelay(true);
  // kube-scheduler sends filter, prioritize and bind for every pod on kept connections; httplib's
  // default of 5 requests per connection made it reconnect every two pods. A connection holds a
  // worker only while a request of it is handled, so a long-lived one takes nothing from others.
  s.set_keep_alive_max_count(100000);
  s.new_task_queue = [pool = pool_.get()] { return new PoolQueue(*pool); };
  // Connections wait for a request at the door (and over HTTPS, handshake there), not on a
  // worker.
  DoorLimits limits{options_.request_timeout, options_.max_connections,
                    options_.max_connections_per_peer, options_.max_body_bytes, nullptr};
  if (Metrics* m = options_.metrics; m != nullptr) {
    limits.count_cut = [m](const char* reason) { m->count_connection_cut(reason); };
  }
  static_cast<DoorServer&>(s).serve_through(std::move(limits), s.new_task_queue);

  const std::string prefix = options_.url_prefix;
  auto is_verb_path = [prefix](const std::string& path) {
    for (const Verb& v : kVerbs) {
      if (path == prefix + "/" + v.name) return true;
    }
    return path == kExplainPath;
  };

  Metrics* metrics = options_.metrics;
  const std::string overloaded =
      "overloaded: all " + std::to_string(pool_->workers()) + " workers are busy and " +
      std::to_string(pool_->max_queue()) +
      " connections already wait for one (--workers, --max-queue); retry shortly";
  // In the overflow lane: answer at once and close. Returns true if it answered.
  auto overflow_answer = [metrics, overloaded](const std::string& route, bool verb,
                                               httplib::Response& res) {
    if (!t_overflow) return false;
    if (metrics != nullptr) metrics->count_overload(route);
    if (verb) {
      // kube-scheduler reads only 200 bodies; filter's answer keeps ExtenderFilterResult's keys.
      nlohmann::json out = {{"Error", overloaded}};
      if (route == "filter") {
        out.update({{"Nodes", nullptr},
                    {"NodeNames", nullptr},
                    {"FailedNodes", nullptr},
                    {"FailedAndUnresolvableNodes", nullptr}});
      }
      front_door::answer_and_close(res, 200, out.dump(), kJson);
    } else {
      res.set_header("Retry-After", "1");
      front_door::answer_and_close(res, 503, error_json(overloaded), kJson);
    }
    return true;
  };
  // Every handler starts here: the test hook, or the overflow lane's answer.
  auto enter = [this, overflow_answer](const std::string& route, bool verb,
                                       const httplib::Request& req, httplib::Response& res) {
    if (overflow_answer(route, verb, res)) return false;
    if (options_.before_handler) options_.before_handler(req.path);
    return true;
  };

  const std::size_t limit = options_.max_body_bytes;
  const std::string too_large = too_large_message(limit);
  // A large body, once read, leases its size from the body budget (body_budget.h) before it is
  // parsed, held until the answer is made. Read first: a client sending slowly must not hold a
  // share of the budget. The overflow lane does not parse bodies and leases nothing.
  const std::string no_budget =
      "overloaded: large request bodies already being handled fill the memory budget of " +
      std::to_string(body_budget_->capacity()) +
      " bytes (2 x --max-body-bytes) for --request-timeout; retry shortly";
  auto lease = [this, metrics, no_budget](const std::string& route, std::size_t size,
                                          httplib::Response& res) {
    if (t_overflow) return BodyBudget::Lease();
    BodyBudget::Lease l = body_budget_->acquire(size, options_.request_timeout);
    if (!l.granted()) {
      if (metrics != nullptr) metrics->count_overload(route);
      front_door::answer_and_close(res, 200, error_json(no_budget), kJson);
    }
    return l;
  };
  for (const Verb& v : kVerbs) {
    auto handle = v.handle;
    const std::string name = v.name;
    s.Post(prefix + "/" + v.name, [this, handle, name, enter, lease, limit](
                                      const httplib::Request& req, httplib::Response& res,
                                      const httplib::ContentReader& reader) {
      std::optional<std::string> body = verb_body(req, reader, limit, res);
      if (!body) return;
      const BodyBudget::Lease held = lease(name, body->size(), res);
      if (!held.granted() || !enter(name, true, req, res)) return;
      res.set_content(handle(extender_, *body), kVerbJson);
    });
  }
  // Health probes are cheap and answered in the overflow lane too.
  auto enter_probe = [this](const httplib::Request& req) {
    if (!t_overflow && options_.before_handler) options_.before_handler(req.path);
  };
  // In the overflow lane the connection is closed right after the answer.
  auto probe_answer = [](httplib::Response& res, int status, const char* text) {
    if (t_overflow) return front_door::answer_and_close(res, status, text, "text/plain");
    res.status = status;
    res.set_content(text, "text/plain");
  };
  s.Get("/healthz",
        [enter_probe, probe_answer](const httplib::Request& req, httplib::Response& res) {
          enter_probe(req);
          probe_answer(res, 200, "ok\n");
        });
  s.Get("/readyz",
        [this, enter_probe, probe_answer](const httplib::Request& req, httplib::Response& res) {
          enter_probe(req);
          const bool ready = !options_.ready || options_.ready();
          probe_answer(res, ready ? 200 : 503, ready ? "ok\n" : "not ready\n");
        });
  s.Get("/version", [enter](const httplib::Request& req, httplib::Response& res) {
    if (!enter(req.path, false, req, res)) return;
    res.set_content(
        nlohmann::json{{"name", "gapless-extender"}, {"version", GAPLESS_VERSION}}.dump(), kJson);
  });
  s.Get("/metrics", [this, enter](const httplib::Request& req, httplib::Response& res) {
    if (!enter(req.path, false, req, res)) return;
    res.set_content(extender_.metrics_text(), "text/plain; version=0.0.4");
  });
  s.Get("/debug/state", [this, enter](const httplib::Request& req, httplib::Response& res) {
    if (!enter(req.path, false, req, res)) return;
    res.set_content(extender_.debug_state(), kJson);
  });
  // The GPU map (ui_routes.h, docs/gpu-map.md): its routes are the one transport-free function.
  s.Get(R"(/ui(/.*)?)", [this, enter](const httplib::Request& req, httplib::Response& res) {
    if (!enter("ui", false, req, res)) return;
    UiAnswer a = ui_answer(extender_, req.path);
    res.status = a.status;
    if (!a.location.empty()) res.set_header("Location", a.location);
    res.set_header("Cache-Control", "no-store");
    res.set_content(std::move(a.body), a.content_type);
  });
  // Takes an ExtenderArgs like the verbs, so its body is read and bounded like theirs.
  s.Post(kExplainPath,
         [this, enter, lease, limit](const httplib::Request& req, httplib::Response& res,
                                     const httplib::ContentReader& reader) {
           std::optional<std::string> body = verb_body(req, reader, limit, res);
           if (!body) return;
           const BodyBudget::Lease held = lease("explain", body->size(), res);
           if (!held.granted() || !enter("explain", true, req, res)) return;
           res.set_content(extender_.explain(*body), kJson);
         });

  auto refuse = [is_verb_path, limit, too_large](const httplib::Request& req,
                                                 httplib::Response& res) {
    return refuse_early(req, res, req.method == "POST" && is_verb_path(req.path), limit, too_large);
  };
  s.set_pre_routing_handler([refuse](const httplib::Request& req, httplib::Response& res) {
    return refuse(req, res) ? httplib::Server::HandlerResponse::Handled
                            : httplib::Server::HandlerResponse::Unhandled;
  });
  // httplib answers "Expect: 100-continue" before routing: refuse there too, or the client is
  // told to send the body it is then refused for. Any status but 100 or 417 sends `res`.
  s.set_expect_100_continue_handler([refuse](const httplib::Request& req, httplib::Response& res) {
    return refuse(req, res) ? res.status : 100;
  });
  // Requests httplib itself fails (a malformed request line or headers, a bad chunked body or
  // Content-Encoding) and unknown routes end up here. On an extender verb the answer must still
  // be 200 with Error, or kube-scheduler never sees why. Each such answer closes the connection:
  // part of the request may be unread.
  s.set_error_handler(httplib::Server::HandlerWithResponse(
      [is_verb_path](const httplib::Request& req, httplib::Response& res) {
        if (front_door::closing(res)) return httplib::Server::HandlerResponse::Handled;
        if (req.method == "POST" && is_verb_path(req.path)) {
          front_door::answer_and_close(
              res, 200, error_json("request failed with HTTP " + std::to_string(res.status)),
              kJson);
        } else if (res.body.empty()) {
          const std::string why = res.status == 404 ? "no route " + req.method + " " + req.path
                                                    : "HTTP " + std::to_string(res.status);
          front_door::answer_and_close(res, res.status, error_json(why), kJson);
        } else {
          const std::string type = res.get_header_value("Content-Type");
          front_door::answer_and_close(res, res.status, std::move(res.body), type.c_str());
        }
        return httplib::Server::HandlerResponse::Handled;
      }));
  s.set_exception_handler(
      [is_verb_path](const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) {
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
  if (!setup_) return Error{setup_.error()};
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
  const int bound =
      port == 0 ? server_->bind_to_any_port(host) : (server_->bind_to_port(host, port) ? port : -1);
  if (bound < 0) return Error{"cannot listen on " + host + ":" + std::to_string(port)};
  if (*listening != INVALID_SOCKET) ::listen(*listening, SOMAXCONN);  // only updates the backlog
  return bound;
}

void HttpServer::serve() {
  serve_entered_ = true;
  // An unusable TLS context is never served.
  if (!stop_requested_ && setup_) server_->listen_after_bind();
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
