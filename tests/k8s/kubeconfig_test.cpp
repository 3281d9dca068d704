// kubeconfig_config and in_cluster_config: what a ClientConfig is built from.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "gapless/k8s/api_client.h"
#include "temp_dir.h"

using gapless::k8s::ClientConfig;
using gapless::k8s::in_cluster_config;
using gapless::k8s::kubeconfig_config;
using gapless::test::TempDir;

namespace {

constexpr const char* kCaPem = "-----BEGIN CERTIFICATE-----\nCA DATA\n-----END CERTIFICATE-----\n";
constexpr const char* kCaBase64 =
    "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCkNBIERBVEEKLS0tLS1FTkQgQ0VSVElGSUNBVEUtLS0tLQo=";

// A kubeconfig with two contexts; `cluster` and `user` are the bodies of cluster "c1" and
// user "u1" (indented by 4), used by context "main", the current one.
std::string kubeconfig(const std::string& cluster, const std::string& user) {
  return "apiVersion: v1\nkind: Config\ncurrent-context: main\n"
         "clusters:\n"
         "- name: c1\n  cluster:\n" +
         cluster +
         "- name: c2\n  cluster:\n    server: https://other.example:6443\n"
         "users:\n"
         "- name: u1\n  user:\n" +
         user +
         "- name: u2\n  user:\n    token: other-token\n"
         "contexts:\n"
         "- name: main\n  context: {cluster: c1, user: u1, namespace: ml}\n"
         "- name: second\n  context: {cluster: c2, user: u2}\n";
}

const std::string kServer = "    server: https://10.0.0.1:6443\n";

ClientConfig load_ok(const TempDir& dir, const std::string& text, const std::string& context = "") {
  auto c = kubeconfig_config(dir.write("config", text), context);
  INFO((c.ok() ? std::string() : c.error()));
  REQUIRE(c.ok());
  return c.value();
}

std::string load_error(const TempDir& dir, const std::string& text,
                       const std::string& context = "") {
  auto c = kubeconfig_config(dir.write("config", text), context);
  REQUIRE_FALSE(c.ok());
  return c.error();
}

// Sets an environment variable for the scope, restoring the old value after.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value != nullptr) {
      setenv(name, value, 1);
    } else {
      unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (old_) {
      setenv(name_, old_->c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

}  // namespace

TEST_CASE("kubeconfig: a bearer token from the current context") {
  TempDir dir;
  const ClientConfig c = load_ok(dir, kubeconfig(kServer, "    token: abc123\n"));
  CHECK(c.server == "https://10.0.0.1:6443");
  CHECK(c.token == "abc123");
  CHECK(c.token_file.empty());
  CHECK(c.ca_pem.empty());
  CHECK_FALSE(c.insecure);
  CHECK(c.client_cert_pem.empty());
}

TEST_CASE("kubeconfig: a named context wins over current-context") {
  TempDir dir;
  const ClientConfig c = load_ok(dir, kubeconfig(kServer, "    token: abc\n"), "second");
  CHECK(c.server == "https://other.example:6443");
  CHECK(c.token == "other-token");
}

TEST_CASE("kubeconfig: tokenFile is relative to the kubeconfig's directory and read at once") {
  TempDir dir;
  dir.write("sa-token", "file-token\n");
  const ClientConfig c = load_ok(dir, kubeconfig(kServer, "    tokenFile: sa-token\n"));
  CHECK(c.token_file == dir.file("sa-token"));
  CHECK(c.token == "file-token");
  const std::string err = load_error(dir, kubeconfig(kServer, "    tokenFile: missing-token\n"));
  CHECK_THAT(err, Catch::Contains("user \"u1\": tokenFile: cannot read") &&
                      Catch::Contains("missing-token"));
}

TEST_CASE("kubeconfig: certificate-authority as a relative file or as base64 data") {
  TempDir dir;
  std::filesystem::create_directory(dir.path() / "pki");
  dir.write("pki/ca.crt", kCaPem);
  ClientConfig c =
      load_ok(dir, kubeconfig(kServer + "    certificate-authority: pki/ca.crt\n", ""));
  CHECK(c.ca_pem == kCaPem);
  c = load_ok(dir, kubeconfig(kServer + "    certificate-authority-data: " + kCaBase64 + "\n", ""));
  CHECK(c.ca_pem == kCaPem);
  // An absolute path is taken as is.
  c = load_ok(
      dir, kubeconfig(kServer + "    certificate-authority: " + dir.file("pki/ca.crt") + "\n", ""));
  CHECK(c.ca_pem == kCaPem);
}

TEST_CASE("kubeconfig: base64 padding of every length decodes exactly") {
  TempDir dir;
  const std::pair<const char*, const char*> cases[] = {
      {"YQ==", "a"}, {"YWI=", "ab"}, {"YWJj", "abc"}, {"", ""}};
  for (const auto& [encoded, plain] : cases) {
    const ClientConfig c = load_ok(
        dir, kubeconfig(kServer + "    certificate-authority-data: \"" + encoded + "\"\n", ""));
    CHECK(c.ca_pem == plain);
  }
}

TEST_CASE("kubeconfig: client certificate and key as data or files") {
  TempDir dir;
  ClientConfig c = load_ok(dir, kubeconfig(kServer,
                                           "    client-certificate-data: Y2xpZW50IGNlcnQK\n"
                                           "    client-key-data: Y2xpZW50IGtleSEK\n"));
  CHECK(c.client_cert_pem == "client cert\n");
  CHECK(c.client_key_pem == "client key!\n");
  CHECK(c.token.empty());

  dir.write("me.crt", "CERT");
  dir.write("me.key", "KEY");
  c = load_ok(dir, kubeconfig(kServer,
                              "    client-certificate: me.crt\n    client-key: me.key\n"
                              "    token: both-is-fine\n"));
  CHECK(c.client_cert_pem == "CERT");
  CHECK(c.client_key_pem == "KEY");
  CHECK(c.token == "both-is-fine");
}

TEST_CASE("kubeconfig: insecure-skip-tls-verify") {
  TempDir dir;
  const ClientConfig c =
      load_ok(dir, kubeconfig(kServer + "    insecure-skip-tls-verify: true\n", ""));
  CHECK(c.insecure);
  CHECK_THAT(load_error(dir, kubeconfig(kServer + "    insecure-skip-tls-verify: true\n" +
                                            "    certificate-authority-data: YQ==\n",
                                        "")),
             Catch::Contains("insecure-skip-tls-verify together with a certificate-authority"));
  CHECK_THAT(load_error(dir, kubeconfig(kServer + "    insecure-skip-tls-verify: maybe\n", "")),
             Catch::Contains("insecure-skip-tls-verify must be true or false"));
}

TEST_CASE("kubeconfig: tls-server-name is the cluster's name for TLS") {
  TempDir dir;
  const ClientConfig c = load_ok(
      dir, kubeconfig(kServer + "    tls-server-name: api.internal.example\n", "    token: t\n"));
  CHECK(c.server == "https://10.0.0.1:6443");  // still where calls go
  CHECK(c.tls_server_name == "api.internal.example");
  // Per cluster: context "second" names c2, which has none.
  CHECK(
      load_ok(dir,
              kubeconfig(kServer + "    tls-server-name: api.internal.example\n", "    token: t\n"),
              "second")
          .tls_server_name.empty());
  CHECK(load_ok(dir, kubeconfig(kServer, "    token: t\n")).tls_server_name.empty());
  // With insecure-skip-tls-verify, as kubectl allows (the name is still sent).
  CHECK(load_ok(dir, kubeconfig(kServer + "    insecure-skip-tls-verify: true\n" +
                                    "    tls-server-name: api.internal.example\n",
                                ""))
            .tls_server_name == "api.internal.example");
  CHECK_THAT(load_error(dir, kubeconfig(kServer + "    tls-server-name: [a, b]\n", "")),
             Catch::Contains("cluster \"c1\": tls-server-name must be a string"));
}

TEST_CASE("kubeconfig: a context that does not exist is named in the error") {
  TempDir dir;
  CHECK_THAT(load_error(dir, kubeconfig(kServer, ""), "nope"),
             Catch::Contains("context \"nope\" not found"));
  CHECK_THAT(load_error(dir, "clusters: []\ncontexts: []\n"),
             Catch::Contains("no context given and no current-context set"));
}

TEST_CASE("kubeconfig: exec and auth-provider plugins are refused with a clear message") {
  TempDir dir;
  const std::string exec =
      "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n"
      "      command: aws\n      args: [eks, get-token]\n";
  CHECK_THAT(load_error(dir, kubeconfig(kServer, exec)),
             Catch::Contains("user \"u1\" uses an exec credential plugin, which Gapless does "
                             "not run; use a token or client certificate"));
  CHECK_THAT(load_error(dir, kubeconfig(kServer, "    auth-provider: {name: gcp}\n")),
             Catch::Contains("user \"u1\" uses an auth-provider plugin"));
  CHECK_THAT(load_error(dir, kubeconfig(kServer, "    username: a\n    password: b\n")),
             Catch::Contains("basic authentication"));
}

TEST_CASE("kubeconfig: broken files and fields give errors naming the key") {
  TempDir dir;
  CHECK_THAT(load_error(dir, "clusters: [ {name: x\n  : : ]]]"), Catch::Contains("invalid YAML"));
  CHECK_THAT(load_error(dir, "- just\n- a list\n"), Catch::Contains("not a kubeconfig"));
  CHECK_THAT(load_error(dir, kubeconfig("    certificate-authority-data: YQ==\n", "")),
             Catch::Contains("cluster \"c1\": server is missing"));
  CHECK_THAT(load_error(dir, kubeconfig(kServer + "    certificate-authority-data: \"%%%\"\n", "")),
             Catch::Contains("certificate-authority-data: not valid base64"));
  for (const char* bad : {"YQ=a", "Y===", "YQ==YQ=="}) {
    CHECK_THAT(
        load_error(dir,
                   kubeconfig(kServer + "    certificate-authority-data: \"" + bad + "\"\n", "")),
        Catch::Contains("certificate-authority-data: not valid base64"));
  }
  CHECK_THAT(load_error(dir, kubeconfig(kServer + "    certificate-authority: nowhere.crt\n", "")),
             Catch::Contains("cluster \"c1\": certificate-authority: cannot read") &&
                 Catch::Contains("nowhere.crt"));
  CHECK_THAT(load_error(dir, kubeconfig(kServer + "    certificate-authority: a.crt\n" +
                                            "    certificate-authority-data: YQ==\n",
                                        "")),
             Catch::Contains("both certificate-authority and certificate-authority-data"));
  CHECK_THAT(load_error(dir, kubeconfig(kServer, "    client-certificate-data: YQ==\n")),
             Catch::Contains("client-certificate without client-key"));
  CHECK_THAT(load_error(dir, kubeconfig(kServer, "    token: [not, a, string]\n")),
             Catch::Contains("user \"u1\": token must be a string"));
  CHECK_THAT(
      load_error(dir, "current-context: x\ncontexts:\n- name: x\n  context: {cluster: gone}\n"),
      Catch::Contains("cluster \"gone\" not found"));
  CHECK_THAT(load_error(dir,
                        "current-context: x\nclusters:\n- name: c\n  cluster: {server: "
                        "https://a}\ncontexts:\n- name: x\n  context: {cluster: c, user: "
                        "who}\n"),
             Catch::Contains("user \"who\" not found"));
  auto missing = kubeconfig_config(dir.file("no-such-kubeconfig"));
  REQUIRE_FALSE(missing.ok());
  CHECK_THAT(missing.error(), Catch::Contains("no-such-kubeconfig"));
}

TEST_CASE("kubeconfig: a context without a user has no credentials") {
  TempDir dir;
  const ClientConfig c = load_ok(dir,
                                 "current-context: x\nclusters:\n- name: c\n  cluster: {server: "
                                 "'http://127.0.0.1:8080'}\ncontexts:\n- name: x\n  context: "
                                 "{cluster: c}\n");
  CHECK(c.server == "http://127.0.0.1:8080");
  CHECK(c.token.empty());
}

TEST_CASE("kubeconfig from text: files are read through the reader, relative to base_dir") {
  std::vector<std::string> asked;
  auto reader = [&](const std::string& path) -> gapless::Result<std::string> {
    asked.push_back(path);
    if (path == "/etc/kube/pki/ca.crt") return std::string(kCaPem);
    return gapless::Error{"cannot read " + path};
  };
  const std::string text =
      kubeconfig(kServer + "    certificate-authority: pki/ca.crt\n", "    token: t\n");
  auto c = gapless::k8s::parse_kubeconfig(text, "inline", "/etc/kube", "", reader);
  REQUIRE(c.ok());
  CHECK(c->ca_pem == kCaPem);
  CHECK(c->token == "t");
  CHECK(asked == std::vector<std::string>{"/etc/kube/pki/ca.crt"});

  auto bad = gapless::k8s::parse_kubeconfig(kubeconfig(kServer, "    tokenFile: token\n"), "inline",
                                            "/etc/kube", "", reader);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error() == "kubeconfig inline: user \"u1\": tokenFile: cannot read /etc/kube/token");
  auto yaml = gapless::k8s::parse_kubeconfig("a: [", "inline", "/etc/kube", "", reader);
  REQUIRE_FALSE(yaml.ok());
  CHECK_THAT(yaml.error(), Catch::StartsWith("kubeconfig inline: invalid YAML: "));
}

TEST_CASE("in-cluster config: service host and port, token and CA from the service account") {
  TempDir sa;
  sa.write("token", "sa-token-1\n");
  sa.write("ca.crt", kCaPem);
  sa.write("namespace", "kube-system");
  {
    ScopedEnv host("KUBERNETES_SERVICE_HOST", "10.96.0.1");
    ScopedEnv port("KUBERNETES_SERVICE_PORT", "443");
    auto c = in_cluster_config(sa.path().string());
    REQUIRE(c.ok());
    CHECK(c->server == "https://10.96.0.1:443");
    CHECK(c->token == "sa-token-1");
    CHECK(c->token_file == sa.file("token"));
    CHECK(c->ca_pem == kCaPem);
    CHECK_FALSE(c->insecure);
  }
  {
    ScopedEnv host("KUBERNETES_SERVICE_HOST", "fd00:10:96::1");
    ScopedEnv port("KUBERNETES_SERVICE_PORT", "6443");
    auto c = in_cluster_config(sa.path().string());
    REQUIRE(c.ok());
    CHECK(c->server == "https://[fd00:10:96::1]:6443");
  }
}

TEST_CASE("in-cluster config: outside a cluster, or with unreadable files, is an error") {
  TempDir sa;
  {
    ScopedEnv host("KUBERNETES_SERVICE_HOST", nullptr);
    ScopedEnv port("KUBERNETES_SERVICE_PORT", "443");
    auto c = in_cluster_config(sa.path().string());
    REQUIRE_FALSE(c.ok());
    CHECK_THAT(c.error(), Catch::Contains("not running in a Kubernetes cluster"));
  }
  {
    ScopedEnv host("KUBERNETES_SERVICE_HOST", "10.96.0.1");
    ScopedEnv port("KUBERNETES_SERVICE_PORT", "");
    CHECK_FALSE(in_cluster_config(sa.path().string()).ok());
  }
  ScopedEnv host("KUBERNETES_SERVICE_HOST", "10.96.0.1");
  ScopedEnv port("KUBERNETES_SERVICE_PORT", "443");
  auto no_token = in_cluster_config(sa.path().string());
  REQUIRE_FALSE(no_token.ok());
  CHECK_THAT(no_token.error(), Catch::Contains(sa.file("token")));
  sa.write("token", "t");
  auto no_ca = in_cluster_config(sa.path().string());
  REQUIRE_FALSE(no_ca.ok());
  CHECK_THAT(no_ca.error(), Catch::Contains(sa.file("ca.crt")));
}
