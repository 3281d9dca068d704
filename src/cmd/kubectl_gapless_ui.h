// kubectl gapless ui: the GPU map page (docs/gpu-map.md) in the user's browser.
#pragma once

#include <string>

#include "gapless/cli/port_forward.h"

namespace gapless::cli {

// Without --extender: forwards `listen` (HOST:PORT; port 0 picks one) to the extender's loopback
// port with kubectl port-forward (`spec`: kubectl, kubeconfig, context), prints the page's URL
// there on stdout, runs `opener` on it when not empty, and keeps the forward until SIGINT or
// SIGTERM (exit 0) or until kubectl ends (1). The page is the extender's own: the port-forward
// carries the browser's requests with the user's credentials, so nothing needs re-serving.
int forward_ui(PortForwardSpec spec, const std::string& listen, const std::string& opener);

// A port-forward's error, and what a user who cannot port-forward needs to know.
std::string forward_failed(const std::string& error);

// Runs `opener URL` (xdg-open, open) in the background, if set; whether it could be started.
bool open_url(const std::string& opener, const std::string& url);

}  // namespace gapless::cli
