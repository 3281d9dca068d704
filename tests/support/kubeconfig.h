// A kubeconfig for the binaries under test (gapless-agent, kubectl-gapless) that points them at a
// FakeApiServer with a bearer token.
#pragma once

#include <string>

#include "temp_dir.h"

namespace gapless::test {

// Writes `dir`/kubeconfig: one cluster at `server`, one user with `token`, current. Returns
// its path.
inline std::string write_token_kubeconfig(const TempDir& dir, const std::string& server,
                                          const std::string& token) {
  return dir.write("kubeconfig", R"(apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: ")" +
                                     server + R"("}}]
users: [{name: u, user: {token: )" + token +
                                     R"(}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
)");
}

}  // namespace gapless::test
