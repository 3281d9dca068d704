// The TLS side of a ClientConfig, parsed once from PEM text in memory: the CA store that verifies
// the API server and the optional client certificate and key. Private to src/k8s.
#pragma once

#include <openssl/ssl.h>

#include <memory>
#include <string>

#include "gapless/k8s/api_client.h"
#include "gapless/model/result.h"

namespace httplib {
class SSLClient;
}

namespace gapless::k8s {

// Immutable after create(); shared by every connection of an ApiClient (thread-safe).
class TlsIdentity {
 public:
  // Errors name the PEM that does not parse ("client-key: no private key in PEM").
  static Result<std::shared_ptr<const TlsIdentity>> create(const ClientConfig& config);
  ~TlsIdentity();
  TlsIdentity(const TlsIdentity&) = delete;
  TlsIdentity& operator=(const TlsIdentity&) = delete;

  // A client for host:port. Unless insecure, OpenSSL verifies the server during the handshake
  // against the CA bundle only (or the system CAs when no bundle was given) and checks the
  // config's tls_server_name, or else `host`, name or IP address, against the certificate. With
  // a tls_server_name that is no IP address, it is the SNI sent, insecure or not. When the
  // server is rejected, *verify_error gets OpenSSL's reason; it must outlive the client.
  std::unique_ptr<httplib::SSLClient> make_client(const std::string& host, int port,
                                                  std::string* verify_error) const;

 private:
  TlsIdentity() = default;
  X509_STORE* ca_ = nullptr;
  X509* cert_ = nullptr;
  EVP_PKEY* key_ = nullptr;
  bool insecure_ = false;
  std::string server_name_;  // ClientConfig::tls_server_name
};

}  // namespace gapless::k8s
