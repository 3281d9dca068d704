// HTTPS and mutual TLS: the extender verbs over TLS with the client verifying the server
// against its CA, client certificates required with a client CA, and clear start-up errors for
// unusable certificate files. The CA and certificates are made at test time with the openssl
// CLI (scripts/deps.sh installs it); without it these tests are skipped with a warning.
#include <catch2/catch.hpp>
#include <string>

#include "test_paths.h"
#include "tls_support.h"

namespace gapless::test {
namespace {

using namespace tls;

const std::string kFilterBody = extender_args(gpu_pod("p", "uid-p", 1), {"h100-nvs-01"});

}  // namespace

TEST_CASE("TLS: HTTPS serves the verbs; the client verifies the server against the CA",
          "[server][tls]") {
  const Pki* pki = pki_or_skip();
  if (pki == nullptr) return;
  LiveServer srv(tls_options(*pki, false));
  CHECK(srv.http().tls());

  for (const char* host : {"127.0.0.1", "localhost"}) {  // the certificate's IP and DNS names
    INFO("host " << host);
    auto c = https_client(host, srv.port(), pki->path("ca.crt"));
    auto res = c->Post("/filter", kFilterBody, "application/json");
    INFO(httplib::to_string(res.error()) << " verify=" << c->get_openssl_verify_result());
    REQUIRE(res);
    CHECK(res->status == 200);
    const json r = json::parse(res->body);
    CHECK(r.at("Error") == "");
    CHECK(r.at("NodeNames") == json::array({"h100-nvs-01"}));
    auto health = c->Get("/healthz");
    REQUIRE(health);
    CHECK(health->status == 200);
  }
  {  // The bind verb too, over a fresh connection.
    auto c = https_client("127.0.0.1", srv.port(), pki->path("ca.crt"));
    auto res = c->Post("/bind", bind_args("p", "uid-p", "h100-nvs-01"), "application/json");
    REQUIRE(res);
    CHECK(json::parse(res->body).at("Error") == "");
  }
  {  // A client trusting another CA refuses the server.
    auto c = https_client("127.0.0.1", srv.port(), pki->path("other-ca.crt"));
    auto res = c->Get("/healthz");
    CHECK_FALSE(res);
    CHECK(res.error() == httplib::Error::SSLServerVerification);
  }
  {  // Plain HTTP to the TLS port gets no HTTP answer.
    httplib::Client c("127.0.0.1", srv.port());
    c.set_connection_timeout(10);
    c.set_read_timeout(10);
    auto res = c.Get("/healthz");
    CHECK_FALSE(res);
  }
  CHECK(https_ok(*pki, srv.port(), "/readyz"));  // still serving after the failed handshakes
}

TEST_CASE("mutual TLS: with a client CA only clients with a certificate it signed get in",
          "[server][tls]") {
  const Pki* pki = pki_or_skip();
  if (pki == nullptr) return;
  LiveServer srv(tls_options(*pki, true));
  const std::string ca = pki->path("ca.crt");

  {  // No client certificate: the handshake fails, no answer.
    auto c = https_client("127.0.0.1", srv.port(), ca);
    auto res = c->Post("/filter", kFilterBody, "application/json");
    INFO(httplib::to_string(res.error()));
    CHECK_FALSE(res);
  }
  {  // A certificate from another CA: refused.
    auto c = https_client("127.0.0.1", srv.port(), ca, pki->path("stranger.crt"),
                          pki->path("stranger.key"));
    auto res = c->Post("/filter", kFilterBody, "application/json");
    INFO(httplib::to_string(res.error()));
    CHECK_FALSE(res);
  }
  {  // The right client certificate: served.
    auto c =
        https_client("127.0.0.1", srv.port(), ca, pki->path("client.crt"), pki->path("client.key"));
    auto res = c->Post("/filter", kFilterBody, "application/json");
    INFO(httplib::to_string(res.error()));
    REQUIRE(res);
    CHECK(res->status == 200);
    CHECK(json::parse(res->body).at("NodeNames") == json::array({"h100-nvs-01"}));
  }
  {  // Plain HTTP: nothing.
    httplib::Client c("127.0.0.1", srv.port());
    c.set_connection_timeout(10);
    c.set_read_timeout(10);
    CHECK_FALSE(c.Get("/healthz"));
  }
}

TEST_CASE("TLS: unusable certificate options are refused with a message naming the file",
          "[server][tls]") {
  const Pki* pki = pki_or_skip();
  if (pki == nullptr) return;
  struct Case {
    const char* what;
    std::string cert, key, ca;
    std::vector<std::string> expect;  // all must appear in the error
  };
  const std::string missing = pki->path("no-such-dir/server.crt");
  const std::vector<Case> cases = {
      {"missing certificate",
       missing,
       pki->path("server.key"),
       "",
       {"--tls-cert", missing, "cannot read", "No such file"}},
      {"missing key",
       pki->path("server.crt"),
       pki->path("nope.key"),
       "",
       {"--tls-key", pki->path("nope.key"), "cannot read"}},
      {"missing client CA",
       pki->path("server.crt"),
       pki->path("server.key"),
       pki->path("nope.crt"),
       {"--client-ca", pki->path("nope.crt"), "cannot read"}},
      {"certificate not PEM",
       pki->path("garbage.pem"),
       pki->path("server.key"),
       "",
       {"--tls-cert", pki->path("garbage.pem"), "not a PEM certificate"}},
      {"key not PEM",
       pki->path("server.crt"),
       pki->path("garbage.pem"),
       "",
       {"--tls-key", pki->path("garbage.pem")}},
      {"key of another certificate",
       pki->path("server.crt"),
       pki->path("client.key"),
       "",
       {"--tls-key", pki->path("client.key")}},
      {"client CA not PEM",
       pki->path("server.crt"),
       pki->path("server.key"),
       pki->path("garbage.pem"),
       {"--client-ca", pki->path("garbage.pem")}},
      {"certificate without key",
       pki->path("server.crt"),
       "",
       "",
       {"--tls-cert and --tls-key must be given together"}},
      {"key without certificate",
       "",
       pki->path("server.key"),
       "",
       {"--tls-cert and --tls-key must be given together"}},
      {"client CA without certificate",
       "",
       "",
       pki->path("ca.crt"),
       {"--client-ca needs --tls-cert and --tls-key"}},
  };
  for (const Case& c : cases) {
    INFO(c.what);
    server::HttpOptions o;
    o.tls_cert_file = c.cert;
    o.tls_key_file = c.key;
    o.client_ca_file = c.ca;
    const std::string error = LiveServer::bind_error(o);
    INFO("error: " << error);
    REQUIRE_FALSE(error.empty());
    for (const std::string& e : c.expect) CHECK(error.find(e) != std::string::npos);
  }
  // The valid files bind.
  CHECK(LiveServer::bind_error(tls_options(*pki, true)).empty());
}

TEST_CASE("gapless-extender refuses to start on a bad --tls-cert, naming the file",
          "[server][tls]") {
  const std::string bin = gapless::test::binary_dir() + "/gapless-extender";
  if (!fs::exists(bin)) {
    WARN("SKIPPED: " << bin << " is not built");
    return;
  }
  const std::string missing = "/nonexistent-gapless-dir/cert.pem";
  std::string out;
  // `timeout` only guards the suite if the binary wrongly starts serving.
  int rc = run("timeout 30 '" + bin + "' --listen 127.0.0.1:0 --tls-cert " + missing +
                   " --tls-key /nonexistent-gapless-dir/key.pem",
               &out);
  INFO(out);
  CHECK(rc == 1);
  CHECK(out.find(missing) != std::string::npos);
  CHECK(out.find("refusing to start") != std::string::npos);

  rc = run("timeout 30 '" + bin + "' --listen 127.0.0.1:0 --client-ca /tmp/ca.crt", &out);
  INFO(out);
  CHECK(rc == 1);
  CHECK(out.find("--client-ca needs --tls-cert") != std::string::npos);
}

}  // namespace gapless::test
