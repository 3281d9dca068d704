// Test PKI and HTTPS clients for the TLS tests (tls_test.cpp, tls_door_test.cpp): a CA, server
// and client certificates made at test time with the openssl CLI (scripts/deps.sh installs it);
// without it the tests are skipped with a warning.
#pragma once

#include <httplib.h>
#include <sys/wait.h>

#include <array>
#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "live_server.h"

namespace gapless::test::tls {

namespace fs = std::filesystem;

namespace fs = std::filesystem;

inline bool have_openssl() {
  return std::system("command -v openssl >/dev/null 2>&1") == 0;
}

// Runs a shell command; returns its exit status and (in *out) stdout and stderr together.
inline int run(const std::string& command, std::string* out) {
  out->clear();
  std::FILE* p = popen(("{ " + command + "; } 2>&1").c_str(), "r");
  if (p == nullptr) return -1;
  std::array<char, 4096> buf{};
  std::size_t n = 0;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) out->append(buf.data(), n);
  const int status = pclose(p);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// A CA, a server certificate for 127.0.0.1 and localhost, a client certificate from the same
// CA, and a client certificate from another CA; made once per test run, removed at exit.
class Pki {
 public:
  static const Pki& get() {
    static const Pki pki;
    return pki;
  }
  ~Pki() {
    std::error_code ignored;
    if (!dir_.empty()) fs::remove_all(dir_, ignored);
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  const std::string& error() const { return error_; }  // "" if everything was made

 private:
  Pki() {
    std::string tmpl = (fs::temp_directory_path() / "gapless-tls-XXXXXX").string();
    if (mkdtemp(tmpl.data()) == nullptr) {
      error_ = "mkdtemp failed";
      return;
    }
    dir_ = tmpl;
    std::ofstream(path("openssl.cnf")) << R"([req]
distinguished_name = dn
prompt = no
[dn]
CN = unused
[ca_ext]
basicConstraints = critical,CA:TRUE
keyUsage = critical,keyCertSign,cRLSign
subjectKeyIdentifier = hash
[server_ext]
basicConstraints = critical,CA:FALSE
keyUsage = critical,digitalSignature
extendedKeyUsage = serverAuth
subjectAltName = IP:127.0.0.1,DNS:localhost
authorityKeyIdentifier = keyid
[client_ext]
basicConstraints = critical,CA:FALSE
keyUsage = critical,digitalSignature
extendedKeyUsage = clientAuth
authorityKeyIdentifier = keyid
)";
    const std::string d = "cd '" + dir_.string() + "' && ";
    const std::string key = " -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes";
    auto make_ca = [&](const std::string& name, const std::string& cn) {
      return d + "openssl req -x509 -config openssl.cnf -extensions ca_ext" + key + " -keyout " +
             name + ".key -out " + name + ".crt -days 2 -subj '/CN=" + cn + "'";
    };
    auto make_leaf = [&](const std::string& name, const std::string& cn, const std::string& ca,
                         const std::string& ext, int serial) {
      return d + "openssl req -new -config openssl.cnf" + key + " -keyout " + name + ".key -out " +
             name + ".csr -subj '/CN=" + cn + "' && openssl x509 -req -in " + name + ".csr -CA " +
             ca + ".crt -CAkey " + ca + ".key -set_serial " + std::to_string(serial) +
             " -days 2 -extfile openssl.cnf -extensions " + ext + " -out " + name + ".crt";
    };
    for (const std::string& command :
         {make_ca("ca", "Gapless Test CA"), make_ca("other-ca", "Some Other CA"),
          make_leaf("server", "localhost", "ca", "server_ext", 2),
          make_leaf("client", "kube-scheduler", "ca", "client_ext", 3),
          make_leaf("stranger", "kube-scheduler", "other-ca", "client_ext", 4)}) {
      std::string out;
      if (run(command, &out) != 0) {
        error_ = command + ":\n" + out;
        return;
      }
    }
    std::ofstream(path("garbage.pem")) << "this is not PEM\n";
  }

  fs::path dir_;
  std::string error_;
};

// The PKI, or null (with a warning) when the openssl CLI is missing; a generation failure fails.
inline const Pki* pki_or_skip() {
  if (!have_openssl()) {
    WARN(
        "SKIPPED: the openssl CLI is not installed (scripts/deps.sh installs it); TLS tests need "
        "it to make certificates");
    return nullptr;
  }
  const Pki& pki = Pki::get();
  INFO(pki.error());
  REQUIRE(pki.error().empty());
  return &pki;
}

inline server::HttpOptions tls_options(const Pki& pki, bool client_ca) {
  server::HttpOptions o;
  o.tls_cert_file = pki.path("server.crt");
  o.tls_key_file = pki.path("server.key");
  if (client_ca) o.client_ca_file = pki.path("ca.crt");
  return o;
}

// An HTTPS client that verifies the server against `ca` (or the system CAs when ca is ""),
// optionally presenting a client certificate.
inline std::unique_ptr<httplib::SSLClient> https_client(const std::string& host, int port,
                                                        const std::string& ca,
                                                        const std::string& cert = "",
                                                        const std::string& key = "") {
  auto c = cert.empty() ? std::make_unique<httplib::SSLClient>(host, port)
                        : std::make_unique<httplib::SSLClient>(host, port, cert, key);
  if (!ca.empty()) c->set_ca_cert_path(ca.c_str());
  c->enable_server_certificate_verification(true);
  c->set_connection_timeout(10);
  c->set_read_timeout(30);
  c->set_write_timeout(30);
  return c;
}

// Whether GET `path` over a fresh HTTPS connection to 127.0.0.1:`port`, verified against the
// PKI's CA, is answered 200. What came back instead is reported with the next assertion.
inline bool https_ok(const Pki& pki, int port, const std::string& path = "/healthz") {
  auto res = https_client("127.0.0.1", port, pki.path("ca.crt"))->Get(path);
  UNSCOPED_INFO(path << ": "
                     << (res ? std::to_string(res->status) : httplib::to_string(res.error())));
  return res && res->status == 200;
}

}  // namespace gapless::test::tls
