// What RFC 9112 lets a server refuse and Boost.Beast's request parser accepts, checked around it
// (the parser itself refuses the rest: whitespace before a colon, header lines without one,
// non-hex or signed chunk sizes, chunk data without its CRLF, conflicting Content-Lengths,
// Content-Length with Transfer-Encoding in either order). Each of these lets a proxy in front
// of us and this server disagree on where a request ends (request smuggling). Private to the
// door.
#pragma once

#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>
#include <cstddef>
#include <string>
#include <string_view>

namespace gapless::door {

// Scans the raw bytes of a request head as they arrive, before the parser reads them: the parser
// unfolds obsolete line folding (a header line starting with a space or tab) silently, and the
// scan also refuses NUL bytes anywhere in the head.
class HeadScan {
 public:
  // Scans `bytes` (the next bytes of the head, possibly beyond its end: those are ignored).
  // Returns why the head is refused, or "".
  std::string feed(std::string_view bytes);
  bool done() const { return done_; }

 private:
  bool at_line_start_ = true;
  std::size_t lines_ = 0;  // complete lines so far (the request line is the first)
  bool done_ = false;      // the empty line ending the head was seen
};

using RequestHead = boost::beast::http::request<boost::beast::http::string_body>;

// Checks a parsed head: at most `max_headers` fields; one Content-Length of digits only; a
// Transfer-Encoding only as exactly one "chunked"; exactly one Host in HTTP/1.1 (at most one in
// HTTP/1.0). Returns why it is refused, or "".
std::string head_problem(const RequestHead& head, std::size_t max_headers);

}  // namespace gapless::door
