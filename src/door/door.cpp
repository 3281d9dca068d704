#include "gapless/door/door.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/beast/http/error.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "http_session.h"
#include "server_core.h"

namespace gapless::door {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

namespace {

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
Status setup_tls(SSL_CTX& ctx, const DoorOptions& o) {
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

// The handshake thread (ServerCore::handshakes) runs at a lower priority (nice +10) than the
// loop, the workers and the probe listener: when a flood of handshakes and the requests compete
// for the cores, the requests and probes go first; a handshake only waits longer.
void start_handshake_thread(ServerCore& core) {
  constexpr int kHandshakeNice = 10;
  asio::post(core.handshakes.emplace(1),
             [] { (void)setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), kHandshakeNice); });
}

Status check_options(const DoorOptions& o) {
  if (o.workers == 0) return Error{"--workers must be at least 1"};
  if (o.read_timeout.count() <= 0) return Error{"--read-timeout must be positive"};
  if (o.write_timeout.count() <= 0) return Error{"--write-timeout must be positive"};
  if (o.request_timeout.count() <= 0) return Error{"--request-timeout must be positive"};
  if (o.max_connections == 0) return Error{"--max-connections must be at least 1"};
  if (o.max_connections_per_peer == 0) {
    return Error{"--max-connections-per-peer must be at least 1"};
  }
  if (o.max_header_bytes < 1024) return Error{"--max-header-bytes must be at least 1024"};
  if (o.max_headers == 0) return Error{"--max-headers must be at least 1"};
  if (o.max_answer_bytes == 0) return Error{"--max-answer-bytes must be at least 1"};
  if (o.deferred_timeout.count() <= 0) return Error{"--deferred-timeout must be positive"};
  if (o.tls_cert_file.empty() != o.tls_key_file.empty()) {
    return Error{"--tls-cert and --tls-key must be given together"};
  }
  if (!o.client_ca_file.empty() && o.tls_cert_file.empty()) {
    return Error{"--client-ca needs --tls-cert and --tls-key"};
  }
  return Status::Ok();
}

// A connection refused at the accept: over plain HTTP a best-effort 503 first, never waiting.
void refuse_connection(tcp::socket& s, bool tls, const std::string& why) {
  if (!tls) {
    const std::string body = why + "\n";
    const std::string text =
        "HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nConnection: close\r\n"
        "Content-Type: text/plain\r\nContent-Length: " +
        std::to_string(body.size()) + "\r\n\r\n" + body;
    (void)::send(s.native_handle(), text.data(), text.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  }
  boost::system::error_code ignored;
  s.shutdown(tcp::socket::shutdown_both, ignored);
  s.close(ignored);
}

}  // namespace

namespace session_detail {

std::string path_of(beast::string_view target) {
  const auto query = target.find('?');
  return std::string(query == beast::string_view::npos ? target : target.substr(0, query));
}

std::string request_error(const beast::error_code& ec, const DoorOptions& o, int* status) {
  if (ec == http::error::header_limit) {
    *status = 431;
    return "request head exceeds the limit of " + std::to_string(o.max_header_bytes) +
           " bytes (--max-header-bytes)";
  }
  if (ec == http::error::body_limit) {
    *status = 413;
    return "request body exceeds the limit of " + std::to_string(o.max_body_bytes) +
           " bytes (--max-body-bytes)";
  }
  *status = 400;
  if (ec == http::error::bad_content_length) {
    return "Content-Length refused: not a number, several different ones, or both "
           "Content-Length and Transfer-Encoding";
  }
  if (ec == http::error::bad_transfer_encoding) {
    return "Transfer-Encoding refused: both Content-Length and Transfer-Encoding, or several "
           "Transfer-Encodings";
  }
  return "malformed request: " + ec.message();
}

}  // namespace session_detail

ServerCore::Admission ServerCore::admit(const std::string& peer) {
  std::lock_guard lock(mu_);
  std::size_t& from_peer = per_peer_[peer];
  const std::size_t reserve = options.probe_connections;
  Admission a;
  if (open_ >= options.max_connections)
    a.limit = "max_connections";
  else if (from_peer >= options.max_connections_per_peer)
    a.limit = "max_connections_per_peer";
  if (open_ >= options.max_connections + reserve ||
      from_peer >= options.max_connections_per_peer + reserve) {
    if (from_peer == 0) per_peer_.erase(peer);
    return a;  // refused
  }
  ++open_;
  ++from_peer;
  a.admitted = true;
  return a;
}

void ServerCore::release(const std::string& peer) {
  bool many_closed = false;
  {
    std::lock_guard lock(mu_);
    --open_;
    if (auto it = per_peer_.find(peer); it != per_peer_.end() && --it->second == 0) {
      per_peer_.erase(it);
    }
    many_closed = ++closed_ % kClosedPerTrim == 0;
  }
  // Each connection's buffers (TLS: ~100 KB) are freed into malloc's arenas, which keep them: a
  // flood of 1,280 HTTPS connections left 117 MiB 10 s after it ended. Have them handed back
  // as after a large request, once the closing stops.
  if (many_closed) routes.note_large_request_freed();
}

void ServerCore::add(Connection* c, std::weak_ptr<Connection> w) {
  std::lock_guard lock(mu_);
  live_.emplace(c, std::move(w));
}

void ServerCore::remove(Connection* c) {
  std::lock_guard lock(mu_);
  live_.erase(c);
}

void ServerCore::stop_connections() {
  std::vector<std::weak_ptr<Connection>> all;
  {
    std::lock_guard lock(mu_);
    for (auto& [c, w] : live_) all.push_back(w);
  }
  for (auto& w : all) {
    if (auto c = w.lock()) c->stop();
  }
}

Door::Door(RouteTable& routes, DoorOptions options)
    : options_(std::move(options)), setup_(check_options(options_)) {
  options_.workers = std::max<std::size_t>(options_.workers, 1);
  core_ = std::make_unique<ServerCore>(routes, options_);
  if (setup_ && tls()) {
    SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
    if (ctx == nullptr) {
      setup_ = Error{"cannot create a TLS context: " + openssl_error()};
    } else {
      core_->tls.emplace(ctx);  // owns it from here
      setup_ = setup_tls(*ctx, options_);
      if (setup_) start_handshake_thread(*core_);
    }
  }
}

Door::~Door() {
  stop();
}

Status Door::reload_tls() {
  if (!core_->tls) return Error{"not serving HTTPS"};
  // Loaded into a scratch context first: a half-written or mismatched pair never reaches clients.
  std::shared_ptr<SSL_CTX> scratch(SSL_CTX_new(TLS_server_method()), SSL_CTX_free);
  if (scratch == nullptr) return Error{"cannot create a TLS context: " + openssl_error()};
  DoorOptions pair_only = options_;
  pair_only.client_ca_file.clear();
  if (Status s = setup_tls(*scratch, pair_only); !s) return s;
  // Handed over on the loop, the only thread that makes connections from the live context (the
  // handshake thread works on each connection's own copy of the pair, SSL_new's).
  asio::post(core_->io, [core = core_.get(), scratch] {
    SSL_CTX* live = core->tls->native_handle();
    STACK_OF(X509)* chain = nullptr;
    SSL_CTX_get0_chain_certs(scratch.get(), &chain);
    SSL_CTX_use_certificate(live, SSL_CTX_get0_certificate(scratch.get()));
    SSL_CTX_set1_chain(live, chain);
    SSL_CTX_use_PrivateKey(live, SSL_CTX_get0_privatekey(scratch.get()));
  });
  return Status::Ok();
}

ssl_ctx_st* Door::tls_context() {
  return core_->tls ? core_->tls->native_handle() : nullptr;
}

std::size_t Door::queued_connections() const {
  return core_->pool.queued();
}
std::size_t Door::busy_workers() const {
  return core_->pool.busy();
}
bool Door::bound() const {
  return core_->acceptor.has_value();
}

namespace {

// Binds, listens and returns the bound port (port 0: a free one).
Result<int> listen_on(ServerCore& core, const std::string& host, int port) {
  const std::string where = host + ":" + std::to_string(port);
  boost::system::error_code ec;
  tcp::resolver resolver(core.io);
  auto found = resolver.resolve(host, std::to_string(port),
                                tcp::resolver::passive | tcp::resolver::numeric_service, ec);
  if (ec || found.empty()) return Error{"cannot listen on " + where + ": " + ec.message()};
  const tcp::endpoint endpoint = found.begin()->endpoint();
  tcp::acceptor& a = core.acceptor.emplace(core.io);
  // SO_REUSEADDR only allows restarts; never SO_REUSEPORT, which would let a second extender
  // share the port and silently take half the calls with its own model.
  if (a.open(endpoint.protocol(), ec) || a.set_option(tcp::acceptor::reuse_address(true), ec) ||
      a.bind(endpoint, ec) || a.listen(SOMAXCONN, ec)) {
    core.acceptor.reset();
    return Error{"cannot listen on " + where + ": " + ec.message()};
  }
  return static_cast<int>(a.local_endpoint().port());
}

}  // namespace

Result<int> Door::bind(const std::string& host, int port) {
  if (!setup_) return Error{setup_.error()};
  return listen_on(*core_, host, port);
}

namespace {

void accept_next(ServerCore& core) {
  core.acceptor->async_accept([&core](boost::system::error_code ec, tcp::socket s) {
    if (core.stopping || !core.acceptor->is_open()) return;
    if (!ec) {
      boost::system::error_code peer_ec;
      const std::string peer = s.remote_endpoint(peer_ec).address().to_string();
      const ServerCore::Admission a = core.admit(peer);
      if (!a.admitted) {
        core.count_cut(a.limit);
        refuse_connection(s, core.tls.has_value(),
                          "too many connections (" + flag_of(a.limit) + ")");
      } else {
        s.set_option(tcp::no_delay(true), peer_ec);  // answers go out whole, at once
        if (core.tls) {
          std::make_shared<Session<asio::ssl::stream<tcp::socket>>>(
              core, asio::ssl::stream<tcp::socket>(std::move(s), *core.tls), peer, a.limit)
              ->start();
        } else {
          std::make_shared<Session<tcp::socket>>(core, std::move(s), peer, a.limit)->start();
        }
      }
    }
    accept_next(core);  // also after a failed accept (e.g. out of descriptors for a moment)
  });
}

}  // namespace

void Door::run() {
  if (stop_requested_ || !setup_ || !core_->acceptor) return;
  accept_next(*core_);
  core_->io.run();
}

void Door::stop() {
  if (stop_requested_.exchange(true)) return;
  ServerCore& core = *core_;
  // Here, not on the loop: when stop() returns no queued request may still reach a worker.
  core.pool.shutdown();
  core.probes.shutdown();
  core.debug.shutdown();
  core.large.shutdown();
  asio::post(core.io, [&core] {
    core.stopping = true;
    boost::system::error_code ignored;
    if (core.acceptor) core.acceptor->close(ignored);
    core.stop_connections();
  });
}

}  // namespace gapless::door
