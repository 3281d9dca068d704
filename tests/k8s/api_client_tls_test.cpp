// ApiClient over TLS: server verification against the configured CA (and only it), host name
// and IP checks, insecure mode, client certificates. Certificates are made at test time with
// the openssl command-line tool.
#include <httplib.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>

#include "gapless/k8s/api_client.h"
#include "temp_dir.h"
#include "test_paths.h"

using gapless::k8s::ApiClient;
using gapless::k8s::ClientConfig;
using gapless::test::TempDir;

namespace {

// A CA, a second unrelated CA, a server certificate for 127.0.0.1 and localhost, one for
// another name, one whose only name is api.gapless.test (a kubeconfig's tls-server-name), and a
// client certificate, all EC P-256, in one temporary directory.
class Pki {
 public:
  Pki() {
    const std::string script = R"(set -e
cd ')" + dir_.path().string() + R"('
key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }
ca() {
  key "$1.key"
  openssl req -x509 -new -key "$1.key" -out "$1.crt" -days 2 -subj "/CN=$1" \
    -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign
}
leaf() {  # name ext
  key "$1.key"
  openssl req -new -key "$1.key" -out "$1.csr" -subj "/CN=$1"
  printf '%s\n' "$2" > "$1.ext"
  openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -out "$1.crt" \
    -days 2 -extfile "$1.ext" 2>/dev/null
}
ca ca
ca other-ca
leaf server 'subjectAltName=IP:127.0.0.1,DNS:localhost'
leaf elsewhere 'subjectAltName=DNS:elsewhere.example'
leaf named 'subjectAltName=DNS:api.gapless.test'
leaf client 'extendedKeyUsage=clientAuth'
)";
    dir_.write("make.sh", script);
    ok_ = std::system(("sh '" + dir_.file("make.sh") + "' >/dev/null 2>&1").c_str()) == 0;
  }
  bool ok() const { return ok_; }
  std::string path(const std::string& name) const { return dir_.file(name); }
  std::string pem(const std::string& name) const {
    return gapless::test::read_text(dir_.file(name));
  }

 private:
  TempDir dir_;
  bool ok_ = false;
};

// Made once per test run.
const Pki& test_pki() {
  static const Pki pki;
  return pki;
}

// An HTTPS server on 127.0.0.1 answering GET /api/v1/nodes with the Authorization header and
// the SNI it got ("auth", "sni"); with `client_ca`, it requires a client certificate signed by
// that CA.
class TlsServer {
 public:
  TlsServer(const Pki& pki, const std::string& cert, const std::string& client_ca = "") {
    const std::string crt = pki.path(cert + ".crt");
    const std::string key = pki.path(cert + ".key");
    const std::string ca = client_ca.empty() ? "" : pki.path(client_ca + ".crt");
    server_ = std::make_unique<httplib::SSLServer>(crt.c_str(), key.c_str(),
                                                   ca.empty() ? nullptr : ca.c_str());
    REQUIRE(server_->is_valid());
    server_->Get("/api/v1/nodes", [](const httplib::Request& req, httplib::Response& res) {
      const char* sni = SSL_get_servername(req.ssl, TLSEXT_NAMETYPE_host_name);
      res.set_content(R"({"kind":"NodeList","apiVersion":"v1","metadata":{"resourceVersion":"7"},)"
                      R"("items":[],"auth":")" +
                          req.get_header_value("Authorization") + R"(","sni":")" +
                          (sni != nullptr ? sni : "") + "\"}",
                      "application/json");
    });
    port_ = server_->bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_->listen_after_bind(); });
    while (!server_->is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~TlsServer() {
    server_->stop();
    thread_.join();
  }
  std::string url(const std::string& host = "127.0.0.1") const {
    return "https://" + host + ":" + std::to_string(port_);
  }

 private:
  std::unique_ptr<httplib::SSLServer> server_;
  std::thread thread_;
  int port_ = 0;
};

gapless::Result<gapless::k8s::ApiResponse> get_nodes(const ClientConfig& config) {
  return ApiClient(config).call("GET", "/api/v1/nodes", "", "application/json");
}

ClientConfig config_for(const std::string& url, const std::string& ca_pem) {
  ClientConfig c;
  c.server = url;
  c.ca_pem = ca_pem;
  c.timeout = std::chrono::seconds(5);
  return c;
}

}  // namespace

TEST_CASE("api client TLS: the server is verified against the configured CA and host") {
  const Pki& pki = test_pki();
  if (!pki.ok()) {
    WARN("openssl could not make test certificates; TLS tests skipped");
    return;
  }
  TlsServer server(pki, "server");

  SECTION("the right CA, by IP address and by name") {
    ClientConfig c = config_for(server.url(), pki.pem("ca.crt"));
    c.token = "tls-token";
    auto r = get_nodes(c);
    INFO((r.ok() ? std::string() : r.error()));
    REQUIRE(r.ok());
    CHECK(r->status == 200);
    CHECK_THAT(r->body, Catch::Contains("\"auth\":\"Bearer tls-token\""));
    auto by_name = get_nodes(config_for(server.url("localhost"), pki.pem("ca.crt")));
    INFO((by_name.ok() ? std::string() : by_name.error()));
    REQUIRE(by_name.ok());
    CHECK(by_name->status == 200);
  }
  SECTION("a CA bundle with an unrelated CA first still verifies") {
    auto r = get_nodes(config_for(server.url(), pki.pem("other-ca.crt") + pki.pem("ca.crt")));
    REQUIRE(r.ok());
    CHECK(r->status == 200);
  }
  SECTION("the wrong CA is refused, with OpenSSL's reason") {
    auto r = get_nodes(config_for(server.url(), pki.pem("other-ca.crt")));
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.error(), Catch::Contains("server certificate rejected") &&
                              Catch::Contains("local issuer certificate"));
  }
  SECTION("without a CA bundle the system CAs do not know the test CA") {
    auto r = get_nodes(config_for(server.url(), ""));
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.error(), Catch::Contains("server certificate rejected"));
  }
  SECTION("insecure skips verification") {
    ClientConfig c = config_for(server.url(), "");
    c.insecure = true;
    auto r = get_nodes(c);
    REQUIRE(r.ok());
    CHECK(r->status == 200);
  }
  SECTION("garbage CA data is a configuration error") {
    auto r = get_nodes(config_for(server.url(), "not a certificate"));
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.error(), Catch::Contains("certificate-authority: no certificate in PEM data"));
  }
}

TEST_CASE("api client TLS: a certificate for another name is refused") {
  const Pki& pki = test_pki();
  if (!pki.ok()) return;
  TlsServer server(pki, "elsewhere");
  auto r = get_nodes(config_for(server.url(), pki.pem("ca.crt")));
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.error(), Catch::Contains("IP address mismatch"));
  r = get_nodes(config_for(server.url("localhost"), pki.pem("ca.crt")));
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.error(), Catch::Contains("hostname mismatch"));
}

TEST_CASE("api client TLS: a client certificate from PEM in memory") {
  const Pki& pki = test_pki();
  if (!pki.ok()) return;
  TlsServer server(pki, "server", /*client_ca=*/"ca");
  ClientConfig c = config_for(server.url(), pki.pem("ca.crt"));

  SECTION("without one the server refuses the connection") {
    CHECK_FALSE(get_nodes(c).ok());
  }
  SECTION("with one the request goes through") {
    c.client_cert_pem = pki.pem("client.crt");
    c.client_key_pem = pki.pem("client.key");
    auto r = get_nodes(c);
    INFO((r.ok() ? std::string() : r.error()));
    REQUIRE(r.ok());
    CHECK(r->status == 200);
  }
  SECTION("a key that does not match the certificate is a configuration error") {
    c.client_cert_pem = pki.pem("client.crt");
    c.client_key_pem = pki.pem("server.key");
    auto r = get_nodes(c);
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.error(), Catch::Contains("client-key does not match client-certificate"));
  }
  SECTION("a certificate without a key is a configuration error") {
    c.client_cert_pem = pki.pem("client.crt");
    auto r = get_nodes(c);
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.error(), Catch::Contains("client-certificate given without client-key"));
  }
}

// kubeconfig tls-server-name (issue 37): the server is reached at the URL's host, but named and
// verified as tls_server_name, as kubectl does.
TEST_CASE("api client TLS: tls_server_name is the SNI sent and the name verified") {
  const Pki& pki = test_pki();
  if (!pki.ok()) return;
  TlsServer server(pki, "named");  // its certificate names api.gapless.test only
  ClientConfig c = config_for(server.url(), pki.pem("ca.crt"));

  SECTION("without it, 127.0.0.1 is checked and refused") {
    auto r = get_nodes(c);
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.error(), Catch::Contains("IP address mismatch"));
  }
  SECTION("with it, the certificate verifies and the server gets the name as SNI") {
    c.tls_server_name = "api.gapless.test";
    auto r = get_nodes(c);
    INFO((r.ok() ? std::string() : r.error()));
    REQUIRE(r.ok());
    CHECK(r->status == 200);
    CHECK_THAT(r->body, Catch::Contains(R"("sni":"api.gapless.test")"));
  }
  SECTION("a name the certificate does not hold is refused") {
    c.tls_server_name = "elsewhere.example";
    auto r = get_nodes(c);
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.error(), Catch::Contains("hostname mismatch"));
  }
  SECTION("insecure skips verification but still sends the name") {
    c.ca_pem.clear();
    c.insecure = true;
    c.tls_server_name = "api.gapless.test";
    auto r = get_nodes(c);
    REQUIRE(r.ok());
    CHECK_THAT(r->body, Catch::Contains(R"("sni":"api.gapless.test")"));
  }
  SECTION("a name with a space or control character is a configuration error") {
    c.tls_server_name = std::string("api.gapless.test\0x", 18);
    auto r = get_nodes(c);
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.error(), Catch::Contains("tls-server-name") && Catch::Contains("not a host name"));
  }
}

TEST_CASE("api client TLS: an IP address as tls_server_name is checked, not sent as SNI") {
  const Pki& pki = test_pki();
  if (!pki.ok()) return;
  TlsServer server(pki, "server");  // 127.0.0.1 and localhost
  ClientConfig c = config_for(server.url("localhost"), pki.pem("ca.crt"));
  c.tls_server_name = "127.0.0.1";
  auto r = get_nodes(c);
  INFO((r.ok() ? std::string() : r.error()));
  REQUIRE(r.ok());
  CHECK_THAT(r->body, Catch::Contains(R"("sni":"")"));
  c.tls_server_name = "127.0.0.2";
  r = get_nodes(c);
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.error(), Catch::Contains("IP address mismatch"));
}

TEST_CASE("api client TLS: a kubeconfig's tls-server-name reaches the connection") {
  const Pki& pki = test_pki();
  if (!pki.ok()) return;
  TlsServer server(pki, "named");
  const auto kubeconfig = [&](const std::string& extra) {
    return "apiVersion: v1\nkind: Config\ncurrent-context: main\n"
           "clusters:\n- name: c\n  cluster:\n    server: " +
           server.url() + "\n    certificate-authority: " + pki.path("ca.crt") + "\n" + extra +
           "contexts:\n- name: main\n  context: {cluster: c}\n";
  };
  auto with = gapless::k8s::parse_kubeconfig(kubeconfig("    tls-server-name: api.gapless.test\n"),
                                             "test", "/");
  REQUIRE(with.ok());
  auto r = get_nodes(*with);
  INFO((r.ok() ? std::string() : r.error()));
  REQUIRE(r.ok());
  CHECK(r->status == 200);
  auto without = gapless::k8s::parse_kubeconfig(kubeconfig(""), "test", "/");
  REQUIRE(without.ok());
  CHECK_FALSE(get_nodes(*without).ok());
}
