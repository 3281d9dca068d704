// The GPU map's routes (docs/gpu-map.md), independent of the HTTP transport: the server hands
// every GET whose path is /ui or starts with /ui/ to ui_answer and sends what it returns.
//
//   GET /ui                 301 to ui/ (relative, so it works behind the API server's proxy)
//   GET /ui/                the page (ui/index.html)
//   GET /ui/<file>          the page's other files (ui/*.js, ui/*.css)
//   GET /ui/map.json        Extender::gpu_map()
//   GET /ui/explain/<uid>   Extender::explain_pending(uid)
//
// Thread-safe (reads the model under the Scheduler's read lock).
#pragma once

#include <string>

#include "gapless/server/extender.h"

namespace gapless::server {

struct UiAnswer {
  int status = 200;
  std::string body;
  std::string content_type;
  std::string location;  // set with a redirect
};

// Whether the HTTP server should route `path` here.
bool is_ui_path(const std::string& path);

// The answer to GET `path` (a path for which is_ui_path holds).
UiAnswer ui_answer(const Extender& extender, const std::string& path);

}  // namespace gapless::server
