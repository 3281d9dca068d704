// What the HTTP front checks and does before and around a route handler, on top of cpp-httplib
// 0.11: request framing that httplib accepts but must not be (two Content-Lengths, Content-Length
// with chunked), a body limit that also holds for chunked bodies, and closing a connection right
// after an answer. Private to the server.
#pragma once

#include <httplib.h>

#include <cstddef>
#include <string>

namespace gapless::server::front_door {

// Sends `body` with `status` and closes the connection right after it, whatever the client asked.
//
// httplib 0.11 decides keep-alive from the request alone: a handler's "Connection: close" is sent
// but the socket stays open for the next request (up to 5 s idle), holding its thread. It does
// close a connection whose response body fails to write, so the body goes out through a content
// provider that writes all of it and then reports failure. Used where the rest of the request may
// be unread (refused framing, an oversized or unreadable body) and in the overflow lane.
void answer_and_close(httplib::Response& res, int status, std::string body,
                      const char* content_type);

// Whether answer_and_close answered `res` (httplib's error handler must then leave it alone).
bool closing(const httplib::Response& res);

// Why the request's framing is refused, or "" if it is fine: several Content-Length headers, one
// that is not a decimal number, Content-Length together with Transfer-Encoding, or a
// Transfer-Encoding other than a single "chunked". Any of these lets a proxy in front of us and
// httplib disagree on where the body ends (request smuggling).
std::string framing_problem(const httplib::Request& req);

// The declared Content-Length; 0 when absent. REQUIRES: framing_problem(req) is "".
std::size_t content_length(const httplib::Request& req);

// Whether httplib reads a body for this method (it does for POST, PUT, PATCH, DELETE).
bool reads_body(const httplib::Request& req);

enum class BodyRead { kOk, kTooLarge, kFailed };

// Capacity read_body leaves spare behind a body of declared length: simdjson's padding
// (SIMDJSON_PADDING, checked where it is used), so the verbs' JSON reader can parse the body where
// it lies.
inline constexpr std::size_t kParsePadding = 64;

// Reads the body through `reader`, stopping as soon as it would exceed `limit` bytes: httplib's
// payload_max_length holds only for a Content-Length, a chunked body is read without bound.
// Any Content-Type is taken as raw bytes (no form-urlencoded or multipart parsing).
BodyRead read_body(const httplib::Request& req, const httplib::ContentReader& reader,
                   std::size_t limit, std::string* body);

}  // namespace gapless::server::front_door
