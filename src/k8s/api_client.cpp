#include "gapless/k8s/api_client.h"

#include <httplib.h>
#include <signal.h>

#include <algorithm>
#include <charconv>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>

#include "gapless/k8s/json_stream.h"
#include "tls_identity.h"
#include "token_source.h"

namespace gapless::k8s {

namespace {

using nlohmann::json;

constexpr auto kWatchSlack = std::chrono::seconds(30);    // beyond the server's timeoutSeconds
constexpr auto kWatchDefault = std::chrono::minutes(10);  // watch read timeout without one
constexpr std::size_t kMaxEventBytes = std::size_t{64} << 20;

struct ServerUrl {
  bool https = true;
  std::string host;  // without brackets
  int port = 443;
  std::string base_path;  // "" or "/prefix", no trailing slash
};

Result<ServerUrl> parse_server(const std::string& server) {
  ServerUrl url;
  std::string_view rest = server;
  if (rest.starts_with("https://")) {
    rest.remove_prefix(8);
  } else if (rest.starts_with("http://")) {
    rest.remove_prefix(7);
    url.https = false;
    url.port = 80;
  } else {
    return Error{"server \"" + server + "\": must start with https:// (or http://)"};
  }
  const std::size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  if (slash != std::string_view::npos) {
    url.base_path = std::string(rest.substr(slash));
    while (url.base_path.ends_with('/')) url.base_path.pop_back();
  }
  std::string_view port_text;
  if (authority.starts_with('[')) {
    const std::size_t close = authority.find(']');
    if (close == std::string_view::npos) return Error{"server \"" + server + "\": unclosed '['"};
    url.host = std::string(authority.substr(1, close - 1));
    std::string_view after = authority.substr(close + 1);
    if (!after.empty() && !after.starts_with(':')) {
      return Error{"server \"" + server + "\": junk after ']'"};
    }
    if (!after.empty()) port_text = after.substr(1);
  } else {
    const std::size_t colon = authority.rfind(':');
    url.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) port_text = authority.substr(colon + 1);
  }
  if (url.host.empty()) return Error{"server \"" + server + "\": no host"};
  if (!port_text.empty()) {
    int port = 0;
    auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
    if (ec != std::errc() || end != port_text.data() + port_text.size() || port <= 0 ||
        port > 65535) {
      return Error{"server \"" + server + "\": bad port"};
    }
    url.port = port;
  }
  return url;
}

// The value of `key` in the path's query string, when it is a non-negative integer.
std::optional<long> query_int(const std::string& path, std::string_view key) {
  const std::size_t q = path.find('?');
  if (q == std::string::npos) return std::nullopt;
  std::string_view query = std::string_view(path).substr(q + 1);
  while (!query.empty()) {
    const std::size_t amp = query.find('&');
    std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    if (pair.size() <= key.size() || !pair.starts_with(key) || pair[key.size()] != '=') continue;
    std::string_view value = pair.substr(key.size() + 1);
    long n = 0;
    auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
    if (ec == std::errc() && end == value.data() + value.size() && n >= 0) return n;
  }
  return std::nullopt;
}

// httplib 0.11 sends without MSG_NOSIGNAL and OpenSSL writes with write(): a write to a
// connection the server has closed would raise SIGPIPE and kill the process. Ignore it, unless
// the program installed its own handler.
void ignore_sigpipe() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction current {};
    if (sigaction(SIGPIPE, nullptr, &current) == 0 && current.sa_handler == SIG_DFL) {
      signal(SIGPIPE, SIG_IGN);
    }
  });
}

}  // namespace

struct ApiClient::Impl {
  explicit Impl(ClientConfig c) : config(std::move(c)), token(config.token, config.token_file) {}

  // A connection to the API server. Calls take one from the idle pool (kept alive) or open one,
  // and give it back when done, so concurrent calls stay independent while a bind's calls
  // do not each pay a TCP and TLS handshake (README, "Through a real kube-scheduler": ~50 ms a
  // bind with a handshake per call, ~20 ms kept alive). Watches open their own.
  struct Connection {
    std::string tls_error;  // why the server's certificate was rejected
    std::unique_ptr<httplib::ClientImpl> client;
  };

  // A pooled call keeps its connection alive for the next; a watch holds its own and closes it.
  enum class Reuse { kPooled, kOwn };

  std::unique_ptr<Connection> connect(std::chrono::milliseconds read_timeout, Reuse reuse) const {
    auto conn = std::make_unique<Connection>();
    if (url.https) {
      conn->client = tls->make_client(url.host, url.port, &conn->tls_error);
    } else {
      conn->client = std::make_unique<httplib::ClientImpl>(url.host, url.port);
    }
    conn->client->set_connection_timeout(config.timeout);
    conn->client->set_write_timeout(config.timeout);
    conn->client->set_read_timeout(read_timeout);
    conn->client->set_keep_alive(reuse == Reuse::kPooled);
    // httplib writes a request's headers and body separately: with Nagle's algorithm the body
    // waits for the ACK of the headers, which the API server's TCP stack delays by up to 40 ms.
    // Every write (a claim, a Binding) took ~50 ms against a local kube-apiserver without this.
    conn->client->set_tcp_nodelay(true);
    conn->client->set_url_encode(false);  // paths come encoded
    return conn;
  }

  // An idle kept-alive connection, or a new one; `reused` says which.
  std::unique_ptr<Connection> take(bool* reused) {
    {
      std::lock_guard lock(idle_mu);
      if (!idle.empty()) {
        std::unique_ptr<Connection> conn = std::move(idle.back());
        idle.pop_back();
        *reused = true;
        return conn;
      }
    }
    *reused = false;
    return connect(config.timeout, Reuse::kPooled);
  }
  // Back to the pool after a call that got an answer; at most kMaxIdle are kept.
  void give_back(std::unique_ptr<Connection> conn) {
    std::lock_guard lock(idle_mu);
    if (idle.size() < kMaxIdle) idle.push_back(std::move(conn));
  }
  // As many as calls run at once in the extender: its 64 bind threads (--bind-threads) and a few
  // lists. With 4, twelve of sixteen concurrent binds paid a TLS handshake per call.
  static constexpr std::size_t kMaxIdle = 72;

  httplib::Request request(const std::string& method, const std::string& path,
                           const std::string& bearer) const {
    httplib::Request req;
    req.method = method;
    req.path = url.base_path + path;
    req.set_header("Accept", "application/json");
    req.set_header("User-Agent", "gapless-extender/" GAPLESS_VERSION);
    if (!bearer.empty()) req.set_header("Authorization", "Bearer " + bearer);
    return req;
  }

  std::string failure(const std::string& method, const std::string& path, httplib::Error error,
                      const Connection& conn) const {
    std::string what;
    switch (error) {
      case httplib::Error::Connection:
        what = "cannot connect";
        break;
      case httplib::Error::ConnectionTimeout:
        what = "connect timed out";
        break;
      case httplib::Error::Read:
        what = "reading the response failed or timed out";
        break;
      case httplib::Error::Write:
        what = "sending the request failed or timed out";
        break;
      case httplib::Error::SSLConnection:
      case httplib::Error::SSLServerVerification:
        what = conn.tls_error.empty() ? "TLS handshake failed"
                                      : "server certificate rejected: " + conn.tls_error;
        break;
      default:
        what = httplib::to_string(error);
    }
    return method + " " + config.server + path + ": " + what;
  }

  ClientConfig config;
  std::string setup_error;
  ServerUrl url;
  std::shared_ptr<const TlsIdentity> tls;
  mutable TokenSource token;
  std::mutex idle_mu;
  std::vector<std::unique_ptr<Connection>> idle;  // guarded by idle_mu
};

ApiClient::ApiClient(ClientConfig config) : impl_(std::make_unique<Impl>(std::move(config))) {
  ignore_sigpipe();
  auto url = parse_server(impl_->config.server);
  if (!url.ok()) {
    impl_->setup_error = url.error();
    return;
  }
  impl_->url = std::move(url.value());
  if (!impl_->url.https) return;
  auto tls = TlsIdentity::create(impl_->config);
  if (!tls.ok()) {
    impl_->setup_error = "TLS setup for " + impl_->config.server + ": " + tls.error();
    return;
  }
  impl_->tls = std::move(tls.value());
}

ApiClient::~ApiClient() = default;

Result<ApiResponse> ApiClient::call(const std::string& method, const std::string& path,
                                    const std::string& body, const std::string& content_type) {
  if (!impl_->setup_error.empty()) return Error{impl_->setup_error};
  bool token_retried = false;
  for (;;) {
    const std::string bearer = impl_->token.get();
    bool reused = false;
    auto conn = impl_->take(&reused);
    httplib::Request req = impl_->request(method, path, bearer);
    if (!body.empty()) {
      req.body = body;
      req.set_header("Content-Type", content_type);
    }
    httplib::Response res;
    httplib::Error error = httplib::Error::Success;
    if (!conn->client->send(req, res, error)) {
      // A kept connection the server closed meanwhile: once more on a new one. Every caller's
      // writes are safe to repeat (bindings and claims are checked against what the server
      // has; a duplicate Event is harmless).
      if (reused) continue;
      return Error{impl_->failure(method, path, error, *conn)};
    }
    impl_->give_back(std::move(conn));
    // A rotated token: retry once with the new one.
    if (res.status == 401 && !token_retried && impl_->token.reload() != bearer) {
      token_retried = true;
      continue;
    }
    return ApiResponse{res.status, std::move(res.body)};
  }
}

Result<int> ApiClient::watch(const std::string& path,
                             const std::function<bool(const nlohmann::json&)>& on_event) {
  if (!impl_->setup_error.empty()) return Error{impl_->setup_error};
  const std::optional<long> server_timeout = query_int(path, "timeoutSeconds");
  const auto read_timeout = std::chrono::duration_cast<std::chrono::milliseconds>(
      server_timeout ? std::chrono::seconds(*server_timeout) + kWatchSlack : kWatchDefault);
  for (int attempt = 0;; ++attempt) {
    const std::string bearer = impl_->token.get();
    auto conn = impl_->connect(read_timeout, Impl::Reuse::kOwn);
    int status = 0;
    bool stopped = false;  // on_event asked to stop
    std::string bad_stream;
    JsonStreamSplitter splitter;
    const auto on_value = [&](std::string_view text) {
      json event = json::parse(text, nullptr, false);
      if (event.is_discarded()) {
        bad_stream = "invalid JSON in watch stream: " + std::string(text.substr(0, 200));
        return false;
      }
      stopped = !on_event(event);
      return !stopped;
    };
    httplib::Request req = impl_->request("GET", path, bearer);
    req.response_handler = [&](const httplib::Response& r) {
      status = r.status;
      return true;
    };
    req.content_receiver = [&](const char* data, std::size_t size, std::uint64_t, std::uint64_t) {
      if (status != 200) return true;  // an error's body is a Status, not events
      if (!splitter.feed(std::string_view(data, size), on_value)) return false;
      if (splitter.pending() > kMaxEventBytes) {
        bad_stream = "watch event larger than 64 MiB";
        return false;
      }
      return true;
    };
    httplib::Response res;
    httplib::Error error = httplib::Error::Success;
    const bool sent = conn->client->send(req, res, error);
    if (sent && status == 200 && !stopped && bad_stream.empty()) splitter.finish(on_value);
    if (stopped) return status;
    if (!bad_stream.empty()) return Error{"GET " + impl_->config.server + path + ": " + bad_stream};
    if (!sent) return Error{impl_->failure("GET", path, error, *conn)};
    if (status == 401 && attempt == 0 && impl_->token.reload() != bearer) continue;
    return status;
  }
}

std::string api_error(const ApiResponse& r) {
  std::string detail;
  const json body = json::parse(r.body, nullptr, false);
  if (body.is_object()) {
    auto it = body.find("message");
    if (it != body.end() && it->is_string()) detail = it->get<std::string>();
  }
  if (detail.empty()) detail = trim_whitespace(r.body);
  if (detail.size() > 1000) detail = detail.substr(0, 1000) + "...";
  if (detail.empty()) detail = "(empty body)";
  return "HTTP " + std::to_string(r.status) + ": " + detail;
}

}  // namespace gapless::k8s
