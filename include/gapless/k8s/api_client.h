// A small Kubernetes API client: JSON requests and watch streams over cpp-httplib (OpenSSL),
// configured in-cluster (service-account token and CA) or from a kubeconfig.
//
// Everything that talks to the API server goes through ApiTransport, so informers and the binder
// can be tested against an in-memory fake as well as the fake API server in tests/.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>

#include "gapless/model/result.h"

namespace gapless::k8s {

struct ClientConfig {
  std::string server;             // "https://10.0.0.1:443" (http:// only for tests)
  std::string ca_pem;             // CA bundle to verify the server; empty: system CAs
  bool insecure = false;          // skip server verification (kubeconfig insecure-skip-tls-verify)
  // The server's name for TLS (kubeconfig tls-server-name): sent as SNI and checked against its
  // certificate instead of the server URL's host, which is still where calls connect. Empty:
  // the URL's host.
  std::string tls_server_name;
  std::string token;              // bearer token
  std::string token_file;         // re-read at most every minute and after a 401; wins over token
  std::string client_cert_pem;    // client certificate authentication
  std::string client_key_pem;
  std::chrono::milliseconds timeout{10000};  // connect + read + write, per request
};

// In-cluster: KUBERNETES_SERVICE_HOST/PORT, token and ca.crt under `sa_dir`. Error when not in a
// cluster (either variable empty) or a file is unreadable.
Result<ClientConfig> in_cluster_config(
    const std::string& sa_dir = "/var/run/secrets/kubernetes.io/serviceaccount");

// From a kubeconfig file: `context` or the current-context; server, tls-server-name and
// insecure-skip-tls-verify; CA as file or data; bearer token (or tokenFile) or client
// certificate/key as file or data. Relative paths are relative to the kubeconfig's directory.
Result<ClientConfig> kubeconfig_config(const std::string& path, const std::string& context = "");

// Reads a file that a kubeconfig names (CA, client certificate or key, tokenFile).
using KubeconfigFileReader = std::function<Result<std::string>(const std::string& path)>;

// The same from kubeconfig text (kubeconfig_config reads the file and calls this): `source` names
// the kubeconfig in messages, relative paths in it are relative to `base_dir`, and the files it
// names are read with `read_file` (from disk when null).
Result<ClientConfig> parse_kubeconfig(const std::string& text, const std::string& source,
                                      const std::string& base_dir, const std::string& context = "",
                                      const KubeconfigFileReader& read_file = nullptr);

struct ApiResponse {
  int status = 0;
  std::string body;
  bool ok() const { return status >= 200 && status < 300; }
};

// "HTTP 409: <message of the Status object, or the body>".
std::string api_error(const ApiResponse& r);

// Thread-safe: calls may run concurrently.
class ApiTransport {
 public:
  virtual ~ApiTransport() = default;

  // One request. Transport failures (connect, TLS, timeout) are errors; any HTTP status, 4xx and
  // 5xx included, is a response.
  virtual Result<ApiResponse> call(const std::string& method, const std::string& path,
                                   const std::string& body = "",
                                   const std::string& content_type = "application/json") = 0;

  // GET `path` (a watch URL) and hand each JSON value of the streamed body to on_event, split by
  // parsing, not by chunk or line boundaries. Returns the HTTP status once the stream ends (200
  // for a normal end), or a transport error. Stops early when on_event returns false.
  virtual Result<int> watch(const std::string& path,
                            const std::function<bool(const nlohmann::json&)>& on_event) = 0;
};

// The transport over HTTP(S). Each call opens its own connection (no keep-alive), so calls on
// one client never wait for each other. Paths must come URL-encoded; they are sent as given,
// after the server URL's own path, if any. Every request sends `Accept: application/json` and
// the bearer token; after a 401 the token file is re-read and, if the token changed, the
// request is tried once more. A watch's read timeout is its URL's timeoutSeconds + 30 s (10 min
// without one). With a CA bundle only that bundle is trusted; the server's name or IP (its
// tls_server_name when set, which is also the SNI sent) must match its certificate. A configuration
// that cannot work (bad URL, unparsable PEM, key not matching the certificate) makes every call
// fail with the reason. Constructing one ignores SIGPIPE unless the program installed a handler
// (writes to a closed connection raise it).
class ApiClient final : public ApiTransport {
 public:
  explicit ApiClient(ClientConfig config);
  ~ApiClient() override;
  Result<ApiResponse> call(const std::string& method, const std::string& path,
                           const std::string& body, const std::string& content_type) override;
  Result<int> watch(const std::string& path,
                    const std::function<bool(const nlohmann::json&)>& on_event) override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gapless::k8s
