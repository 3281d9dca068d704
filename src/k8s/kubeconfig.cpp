// ClientConfig from the pod's service account (in-cluster) or from a kubeconfig file, as
// client-go builds them (extender-protocol.md §4.1).
#include <openssl/evp.h>
#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "gapless/k8s/api_client.h"
#include "token_source.h"

namespace gapless::k8s {

namespace {

namespace fs = std::filesystem;

Result<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error{"cannot read " + path + ": " + std::strerror(errno)};
  std::stringstream text;
  text << in.rdbuf();
  if (in.bad()) return Error{"cannot read " + path};
  return text.str();
}

// Standard base64 with padding (Go's StdEncoding, what kubeconfig *-data fields hold).
// Whitespace is ignored.
Result<std::string> base64_decode(std::string_view text) {
  std::string in;
  for (char c : text) {
    if (c != ' ' && c != '\n' && c != '\r' && c != '\t') in += c;
  }
  if (in.size() % 4 != 0) return Error{"not valid base64 (length is not a multiple of 4)"};
  // EVP_DecodeBlock does not police padding: '=' may only end the text, at most twice.
  if (const std::size_t eq = in.find('=');
      eq != std::string::npos &&
      (eq + 2 < in.size() || in.find_first_not_of('=', eq) != std::string::npos)) {
    return Error{"not valid base64 (misplaced '=')"};
  }
  std::string out(in.size() / 4 * 3, '\0');
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(in.data()),
                                static_cast<int>(in.size()));
  if (n < 0) return Error{"not valid base64"};
  std::size_t padding = 0;
  if (!in.empty() && in.back() == '=') ++padding;
  if (in.size() > 1 && in[in.size() - 2] == '=') ++padding;
  out.resize(static_cast<std::size_t>(n) - padding);
  return out;
}

// One kubeconfig map (a cluster, user or context) and where it is, for messages.
struct Section {
  YAML::Node node;
  std::string where;  // `user "alice"`

  bool has(const char* key) const { return node[key] && !node[key].IsNull(); }

  Result<std::string> str(const char* key) const {
    const YAML::Node v = node[key];
    if (!v || v.IsNull()) return std::string();
    if (!v.IsScalar()) return Error{where + ": " + key + " must be a string"};
    return v.Scalar();
  }

  Result<bool> flag(const char* key) const {
    const YAML::Node v = node[key];
    if (!v || v.IsNull()) return false;
    bool b = false;
    if (!v.IsScalar() || !YAML::convert<bool>::decode(v, b)) {
      return Error{where + ": " + key + " must be true or false"};
    }
    return b;
  }
};

// The `inner` map of the entry named `name` in the list `list` (clusters/cluster, ...).
Result<Section> find_entry(const YAML::Node& root, const char* list, const char* inner,
                           const std::string& kind, const std::string& name) {
  const YAML::Node entries = root[list];
  if (entries && entries.IsSequence()) {
    for (const YAML::Node& entry : entries) {
      if (!entry.IsMap() || !entry["name"] || !entry["name"].IsScalar()) continue;
      if (entry["name"].Scalar() != name) continue;
      const YAML::Node body = entry[inner];
      if (body && !body.IsNull() && !body.IsMap()) {
        return Error{kind + " \"" + name + "\": " + inner + " must be a mapping"};
      }
      return Section{body && body.IsMap() ? body : YAML::Node(YAML::NodeType::Map),
                     kind + " \"" + name + "\""};
    }
  }
  return Error{kind + " \"" + name + "\" not found in " + list};
}

// PEM text from `<key>-data` (base64) or `<key>` (a file, relative to the kubeconfig).
Result<std::string> pem_field(const Section& s, const std::string& key, const fs::path& dir,
                              const KubeconfigFileReader& read) {
  auto file = s.str(key.c_str());
  if (!file.ok()) return Error{file.error()};
  auto data = s.str((key + "-data").c_str());
  if (!data.ok()) return Error{data.error()};
  if (!file->empty() && !data->empty()) {
    return Error{s.where + ": both " + key + " and " + key + "-data are set; use one"};
  }
  if (!data->empty()) {
    auto decoded = base64_decode(*data);
    if (!decoded.ok()) return Error{s.where + ": " + key + "-data: " + decoded.error()};
    return std::move(decoded.value());
  }
  if (file->empty()) return std::string();
  auto text = read((dir / *file).string());
  if (!text.ok()) return Error{s.where + ": " + key + ": " + text.error()};
  return std::move(text.value());
}

Status apply_user(const Section& user, const fs::path& dir, const KubeconfigFileReader& read,
                  ClientConfig& config) {
  if (user.has("exec") || user.has("auth-provider")) {
    return Error{user.where + " uses " +
                 (user.has("exec") ? "an exec credential plugin" : "an auth-provider plugin") +
                 ", which Gapless does not run; use a token or client certificate"};
  }
  if (user.has("username") || user.has("password")) {
    return Error{user.where + " uses basic authentication (username/password), which Gapless " +
                 "does not support; use a token or client certificate"};
  }
  auto token = user.str("token");
  auto token_file = user.str("tokenFile");
  if (!token.ok()) return Error{token.error()};
  if (!token_file.ok()) return Error{token_file.error()};
  config.token = trim_whitespace(*token);
  if (!token_file->empty()) {
    config.token_file = (dir / *token_file).string();
    auto text = read(config.token_file);
    if (!text.ok()) return Error{user.where + ": tokenFile: " + text.error()};
    if (config.token.empty()) config.token = trim_whitespace(*text);
  }
  auto cert = pem_field(user, "client-certificate", dir, read);
  if (!cert.ok()) return Error{cert.error()};
  auto key = pem_field(user, "client-key", dir, read);
  if (!key.ok()) return Error{key.error()};
  if (cert->empty() != key->empty()) {
    return Error{user.where + ": " +
                 (cert->empty() ? "client-key without client-certificate"
                                : "client-certificate without client-key")};
  }
  config.client_cert_pem = std::move(cert.value());
  config.client_key_pem = std::move(key.value());
  return Status::Ok();
}

Result<ClientConfig> config_from_yaml(const YAML::Node& root, const fs::path& dir,
                                      const std::string& context,
                                      const KubeconfigFileReader& read) {
  if (!root.IsMap()) return Error{"not a kubeconfig (expected a mapping at the top)"};
  std::string context_name = context;
  if (context_name.empty()) {
    const YAML::Node current = root["current-context"];
    if (current && current.IsScalar()) context_name = current.Scalar();
  }
  if (context_name.empty()) return Error{"no context given and no current-context set"};
  auto ctx = find_entry(root, "contexts", "context", "context", context_name);
  if (!ctx.ok()) return Error{ctx.error()};
  auto cluster_name = ctx->str("cluster");
  auto user_name = ctx->str("user");
  if (!cluster_name.ok()) return Error{cluster_name.error()};
  if (!user_name.ok()) return Error{user_name.error()};
  if (cluster_name->empty()) return Error{ctx->where + " names no cluster"};

  auto cluster = find_entry(root, "clusters", "cluster", "cluster", *cluster_name);
  if (!cluster.ok()) return Error{cluster.error()};
  ClientConfig config;
  auto server = cluster->str("server");
  if (!server.ok()) return Error{server.error()};
  if (server->empty()) return Error{cluster->where + ": server is missing"};
  config.server = *server;
  auto ca = pem_field(*cluster, "certificate-authority", dir, read);
  if (!ca.ok()) return Error{ca.error()};
  config.ca_pem = std::move(ca.value());
  auto insecure = cluster->flag("insecure-skip-tls-verify");
  if (!insecure.ok()) return Error{insecure.error()};
  config.insecure = *insecure;
  auto server_name = cluster->str("tls-server-name");
  if (!server_name.ok()) return Error{server_name.error()};
  config.tls_server_name = *server_name;
  if (config.insecure && !config.ca_pem.empty()) {
    return Error{cluster->where + ": insecure-skip-tls-verify together with a " +
                 "certificate-authority is not allowed"};
  }
  if (user_name->empty()) return config;  // no credentials
  auto user = find_entry(root, "users", "user", "user", *user_name);
  if (!user.ok()) return Error{user.error()};
  if (Status s = apply_user(*user, dir, read, config); !s.ok()) return Error{s.error()};
  return config;
}

}  // namespace

Result<ClientConfig> in_cluster_config(const std::string& sa_dir) {
  const char* host = std::getenv("KUBERNETES_SERVICE_HOST");
  const char* port = std::getenv("KUBERNETES_SERVICE_PORT");
  if (host == nullptr || *host == '\0' || port == nullptr || *port == '\0') {
    return Error{
        "not running in a Kubernetes cluster: KUBERNETES_SERVICE_HOST and "
        "KUBERNETES_SERVICE_PORT must both be set"};
  }
  ClientConfig config;
  const std::string h = host;
  // net.JoinHostPort: an IPv6 address goes in brackets.
  config.server = "https://" + (h.find(':') != std::string::npos ? "[" + h + "]" : h) + ":" + port;
  config.token_file = sa_dir + "/token";
  auto token = read_file(config.token_file);
  if (!token.ok()) return Error{"in-cluster config: " + token.error()};
  config.token = trim_whitespace(*token);
  auto ca = read_file(sa_dir + "/ca.crt");
  if (!ca.ok()) return Error{"in-cluster config: " + ca.error()};
  config.ca_pem = std::move(ca.value());
  return config;
}

Result<ClientConfig> kubeconfig_config(const std::string& path, const std::string& context) {
  auto text = read_file(path);
  if (!text.ok()) return Error{"kubeconfig: " + text.error()};
  return parse_kubeconfig(*text, path, fs::path(path).parent_path().string(), context);
}

Result<ClientConfig> parse_kubeconfig(const std::string& text, const std::string& source,
                                      const std::string& base_dir, const std::string& context,
                                      const KubeconfigFileReader& reader) {
  const KubeconfigFileReader from_disk = [](const std::string& p) { return read_file(p); };
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return Error{"kubeconfig " + source + ": invalid YAML: " + e.what()};
  }
  try {
    auto config = config_from_yaml(root, base_dir, context, reader ? reader : from_disk);
    if (!config.ok()) return Error{"kubeconfig " + source + ": " + config.error()};
    return config;
  } catch (const YAML::Exception& e) {  // a shape yaml-cpp refuses to index
    return Error{"kubeconfig " + source + ": " + e.what()};
  }
}

}  // namespace gapless::k8s
