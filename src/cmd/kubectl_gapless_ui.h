// kubectl gapless ui: the GPU map page (docs/gpu-map.md) in the user's browser.
#pragma once

#include <functional>
#include <string>
#include <utility>

#include "gapless/model/result.h"

namespace gapless::cli {

// GET `path` (e.g. "/ui/map.json") of the extender: HTTP status and body.
using FetchFn = std::function<Result<std::pair<int, std::string>>(const std::string& path)>;

// Serves GET /ui and /ui/* on `listen` (HOST:PORT; port 0 picks one) by fetching each path
// through `fetch` (the API server's service proxy, with the kubeconfig's credentials, which a
// browser does not have), prints the page's URL on stdout, runs `opener` on it when not empty,
// and serves until SIGINT or SIGTERM. Returns the exit status.
int serve_ui(const std::string& listen, const FetchFn& fetch, const std::string& opener);

// Runs `opener URL` (xdg-open, open) in the background, if set; whether it could be started.
bool open_url(const std::string& opener, const std::string& url);

}  // namespace gapless::cli
