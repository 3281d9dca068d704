#include "tls_identity.h"

#include <arpa/inet.h>
#include <httplib.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include <algorithm>

namespace gapless::k8s {

namespace {

// The newest entry of OpenSSL's error queue (emptied), for messages.
std::string openssl_error() {
  unsigned long code = 0;
  unsigned long last = 0;
  while ((code = ERR_get_error()) != 0) last = code;
  if (last == 0) return "no details";
  char buf[256];
  ERR_error_string_n(last, buf, sizeof buf);
  return buf;
}

struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
using BioPtr = std::unique_ptr<BIO, BioFree>;

BioPtr memory_bio(const std::string& pem) {
  return BioPtr(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
}

// Remembers why OpenSSL rejected the server's certificate (first failure of the chain).
int remember_verify_error(int ok, X509_STORE_CTX* store_ctx) {
  if (ok) return ok;
  auto* ssl = static_cast<SSL*>(
      X509_STORE_CTX_get_ex_data(store_ctx, SSL_get_ex_data_X509_STORE_CTX_idx()));
  if (ssl == nullptr) return ok;
  auto* out = static_cast<std::string*>(SSL_CTX_get_ex_data(SSL_get_SSL_CTX(ssl), 0));
  if (out != nullptr && out->empty()) {
    *out = X509_verify_cert_error_string(X509_STORE_CTX_get_error(store_ctx));
  }
  return ok;
}

// Where make_client leaves the tls-server-name for send_server_name (an SSL_CTX ex_data slot).
int server_name_slot() {
  static const int slot = SSL_CTX_get_ex_new_index(0, nullptr, nullptr, nullptr, nullptr);
  return slot;
}

bool is_ip_address(const std::string& host) {
  unsigned char buf[sizeof(in6_addr)];
  return inet_pton(AF_INET, host.c_str(), buf) == 1 || inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

// httplib sends its host as SNI, set just before the handshake; this runs as the handshake
// starts, after that, and sends the tls-server-name instead, or none for an IP address (as Go's
// crypto/tls does with client-go's ServerName).
void send_server_name(const SSL* ssl, int where, int /*ret*/) {
  if ((where & SSL_CB_HANDSHAKE_START) == 0) return;
  const auto* name = static_cast<const std::string*>(
      SSL_CTX_get_ex_data(SSL_get_SSL_CTX(ssl), server_name_slot()));
  if (name == nullptr) return;
  char* sni = is_ip_address(*name) ? nullptr : const_cast<char*>(name->c_str());  // copied
  SSL_set_tlsext_host_name(const_cast<SSL*>(ssl), sni);
}

// A name OpenSSL can check and send: no NUL, no spaces or control characters, DNS length.
bool usable_server_name(const std::string& name) {
  if (name.size() > 253) return false;
  return std::all_of(name.begin(), name.end(),
                     [](char c) { return static_cast<unsigned char>(c) > 0x20 && c != 0x7f; });
}

}  // namespace

Result<std::shared_ptr<const TlsIdentity>> TlsIdentity::create(const ClientConfig& config) {
  std::shared_ptr<TlsIdentity> id(new TlsIdentity());
  id->insecure_ = config.insecure;
  if (!usable_server_name(config.tls_server_name)) {
    return Error{"tls-server-name \"" + config.tls_server_name + "\" is not a host name"};
  }
  id->server_name_ = config.tls_server_name;
  ERR_clear_error();
  id->ca_ = X509_STORE_new();
  if (id->ca_ == nullptr) return Error{"TLS: cannot allocate a certificate store"};
  if (config.ca_pem.empty()) {
    X509_STORE_set_default_paths(id->ca_);
  } else {
    BioPtr bio = memory_bio(config.ca_pem);
    int added = 0;
    while (X509* cert = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) {
      X509_STORE_add_cert(id->ca_, cert);
      X509_free(cert);
      ++added;
    }
    ERR_clear_error();  // the loop ends with a "no start line" error
    if (added == 0) return Error{"certificate-authority: no certificate in PEM data"};
  }
  if (config.client_cert_pem.empty() != config.client_key_pem.empty()) {
    return Error{config.client_cert_pem.empty() ? "client-key given without client-certificate"
                                                : "client-certificate given without client-key"};
  }
  if (!config.client_cert_pem.empty()) {
    BioPtr cert_bio = memory_bio(config.client_cert_pem);
    id->cert_ = PEM_read_bio_X509(cert_bio.get(), nullptr, nullptr, nullptr);
    if (id->cert_ == nullptr) {
      return Error{"client-certificate: no certificate in PEM data (" + openssl_error() + ")"};
    }
    BioPtr key_bio = memory_bio(config.client_key_pem);
    id->key_ = PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr);
    if (id->key_ == nullptr) {
      return Error{"client-key: no private key in PEM data (" + openssl_error() + ")"};
    }
    if (X509_check_private_key(id->cert_, id->key_) != 1) {
      ERR_clear_error();
      return Error{"client-key does not match client-certificate"};
    }
  }
  return std::shared_ptr<const TlsIdentity>(std::move(id));
}

TlsIdentity::~TlsIdentity() {
  X509_STORE_free(ca_);
  X509_free(cert_);
  EVP_PKEY_free(key_);
}

std::unique_ptr<httplib::SSLClient> TlsIdentity::make_client(const std::string& host, int port,
                                                             std::string* verify_error) const {
  auto client = cert_ != nullptr ? std::make_unique<httplib::SSLClient>(host, port, cert_, key_)
                                 : std::make_unique<httplib::SSLClient>(host, port);
  // httplib's own check would add the system CAs to a given bundle; OpenSSL verifies instead.
  client->enable_server_certificate_verification(false);
  SSL_CTX* ctx = client->ssl_context();
  if (ctx == nullptr) return client;
  if (!server_name_.empty()) {
    SSL_CTX_set_ex_data(ctx, server_name_slot(), const_cast<std::string*>(&server_name_));
    SSL_CTX_set_info_callback(ctx, send_server_name);
  }
  if (insecure_) return client;
  X509_STORE_up_ref(ca_);
  SSL_CTX_set_cert_store(ctx, ca_);  // takes the reference
  SSL_CTX_set_ex_data(ctx, 0, verify_error);
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, remember_verify_error);
  X509_VERIFY_PARAM* param = SSL_CTX_get0_param(ctx);
  const std::string& name = server_name_.empty() ? host : server_name_;
  if (is_ip_address(name)) {
    X509_VERIFY_PARAM_set1_ip_asc(param, name.c_str());
  } else {
    X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
    X509_VERIFY_PARAM_set1_host(param, name.c_str(), name.size());
  }
  return client;
}

}  // namespace gapless::k8s
