#include "head_rules.h"

#include <boost/beast/core/string.hpp>
#include <iterator>

namespace gapless::door {

namespace http = boost::beast::http;

std::string HeadScan::feed(std::string_view bytes) {
  for (const char c : bytes) {
    if (done_) break;
    if (c == '\0') return "NUL byte in the request head";
    if (at_line_start_) {
      const bool eol = c == '\r' || c == '\n';
      if (lines_ == 0 && eol) continue;  // empty lines before the request line are ignored
      if (lines_ > 0 && (c == ' ' || c == '\t')) return "obsolete line folding in the request head";
      if (lines_ > 0 && eol) {
        done_ = true;  // the empty line: what follows is the body, the parser's
        break;
      }
    }
    at_line_start_ = c == '\n';
    if (at_line_start_) ++lines_;
  }
  return "";
}

std::string head_problem(const RequestHead& head, std::size_t max_headers) {
  const auto fields = static_cast<std::size_t>(std::distance(head.begin(), head.end()));
  if (fields > max_headers) {
    return "request head has " + std::to_string(fields) + " header fields, more than " +
           std::to_string(max_headers) + " (--max-headers)";
  }
  if (const std::size_t n = head.count(http::field::content_length); n > 1) {
    return "request has " + std::to_string(n) + " Content-Length headers";
  }
  if (auto it = head.find(http::field::content_length); it != head.end()) {
    const boost::beast::string_view v = it->value();
    if (v.empty() || v.find_first_not_of("0123456789") != boost::beast::string_view::npos) {
      return "request has a Content-Length that is not a number";
    }
  }
  if (const std::size_t n = head.count(http::field::transfer_encoding); n > 0) {
    if (n > 1) return "request has " + std::to_string(n) + " Transfer-Encoding headers";
    if (!boost::beast::iequals(head[http::field::transfer_encoding], "chunked")) {
      return "Transfer-Encoding other than exactly \"chunked\" is refused";
    }
  }
  const std::size_t hosts = head.count(http::field::host);
  if (hosts > 1) return "request has " + std::to_string(hosts) + " Host headers";
  if (hosts == 0 && head.version() >= 11) return "HTTP/1.1 request without a Host header";
  return "";
}

}  // namespace gapless::door
