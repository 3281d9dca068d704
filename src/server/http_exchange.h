// One request as the event loop hands it to a route, and the answer a route hands back. Private
// to the server (http_server.cpp, http_session.h, routes.*).
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace gapless::server {

// Capacity left spare behind a request body before a verb parses it: simdjson's padding
// (SIMDJSON_PADDING, checked where it is used), so the verbs' JSON reader parses the body where
// it lies.
inline constexpr std::size_t kParsePadding = 64;

// A complete request: head parsed, body fully read and decoded (chunked included) by the loop.
struct Request {
  std::string method;  // "GET", "POST", ...
  std::string path;    // the target without its query
  std::string body;
};

struct Answer {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  // Closes the connection after this answer, whatever the client asked (refusals, overload).
  bool close = false;
  std::vector<std::pair<std::string, std::string>> headers;  // extra ones (Retry-After)
};

// How a route hands its answer back. Callable from any thread; call it exactly once. The
// connection waits for it without holding a worker (deferred answers, e.g. bind).
using Reply = std::function<void(Answer)>;

}  // namespace gapless::server
