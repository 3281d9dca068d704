// Kubeconfig YAML (k8s::parse_kubeconfig). Files it names are never read from disk: every path
// reads as a small fixed PEM, except paths containing "missing", which fail. A configuration
// that parses must be self-consistent (api_client.h).
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_util.h"
#include "gapless/k8s/api_client.h"

namespace {

gapless::Result<std::string> fake_file(const std::string& path) {
  if (path.find("missing") != std::string::npos) {
    return gapless::Error{"cannot read " + path + ": No such file or directory"};
  }
  return std::string("-----BEGIN CERTIFICATE-----\nRkFLRQ==\n-----END CERTIFICATE-----\n");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using gapless::fuzz::check;
  const std::string text(gapless::fuzz::as_text(data, size));
  // The first line may name a context, as --context does: "#context: NAME".
  std::string context;
  if (text.starts_with("#context: ")) context = text.substr(10, text.find('\n') - 10);
  auto config =
      gapless::k8s::parse_kubeconfig(text, "fuzz-kubeconfig", "/fuzz", context, fake_file);
  if (!config) {
    check(config.error().starts_with("kubeconfig fuzz-kubeconfig"),
          "a kubeconfig error without its source", config.error());
    return 0;
  }
  check(!config->server.empty(), "a kubeconfig without a server");
  check(!(config->insecure && !config->ca_pem.empty()), "insecure together with a CA");
  check(config->client_cert_pem.empty() == config->client_key_pem.empty(),
        "a client certificate without a key, or a key without a certificate");
  return 0;
}
