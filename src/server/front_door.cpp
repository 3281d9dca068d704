#include "front_door.h"

#include <charconv>
#include <cstdint>
#include <memory>

#include "gapless/model/ascii.h"

namespace gapless::server::front_door {

void answer_and_close(httplib::Response& res, int status, std::string body,
                      const char* content_type) {
  res.status = status;
  res.body.clear();  // a non-empty body would be written instead of the provider
  res.headers.erase("Content-Type");
  res.headers.erase("Connection");
  res.set_header("Connection", "close");
  if (body.empty()) body = "\n";  // httplib only calls a provider with a length
  auto text = std::make_shared<const std::string>(std::move(body));
  res.set_content_provider(text->size(), content_type,
                           [text](std::size_t offset, std::size_t length, httplib::DataSink& sink) {
                             sink.write(text->data() + offset, length);
                             return false;  // written in full; "failed" makes httplib close
                           });
}

bool closing(const httplib::Response& res) {
  return res.body.empty() && res.get_header_value("Connection") == "close";
}

std::string framing_problem(const httplib::Request& req) {
  const std::size_t lengths = req.get_header_value_count("Content-Length");
  const std::size_t encodings = req.get_header_value_count("Transfer-Encoding");
  if (lengths > 1) return "request has " + std::to_string(lengths) + " Content-Length headers";
  if (lengths == 1 && encodings > 0) {
    return "request has both Content-Length and Transfer-Encoding";
  }
  if (encodings > 1)
    return "request has " + std::to_string(encodings) + " Transfer-Encoding headers";
  if (encodings == 1) {
    const std::string te = model::ascii_lower(req.get_header_value("Transfer-Encoding"));
    if (te != "chunked") return "Transfer-Encoding \"" + te + "\" is not supported (only chunked)";
  }
  if (lengths == 1) {
    const std::string cl = req.get_header_value("Content-Length");
    std::size_t n = 0;
    auto [end, ec] = std::from_chars(cl.data(), cl.data() + cl.size(), n);
    if (cl.empty() || ec != std::errc() || end != cl.data() + cl.size()) {
      return "Content-Length \"" + cl + "\" is not a number of bytes";
    }
  }
  return "";
}

std::size_t content_length(const httplib::Request& req) {
  const std::string cl = req.get_header_value("Content-Length");
  std::size_t n = 0;
  std::from_chars(cl.data(), cl.data() + cl.size(), n);
  return n;
}

bool reads_body(const httplib::Request& req) {
  return req.method == "POST" || req.method == "PUT" || req.method == "PATCH" ||
         req.method == "DELETE";
}

BodyRead read_body(const httplib::Request& req, const httplib::ContentReader& reader,
                   std::size_t limit, std::string* body) {
  bool too_large = false;
  auto append = [&](const char* data, std::size_t n) {
    if (n > limit - body->size()) {
      too_large = true;
      return false;  // stops the read
    }
    body->append(data, n);
    return true;
  };
  // One allocation for a declared length within the limit, not a doubling per chunk (a
  // full-node body is megabytes), with kParsePadding spare so the verbs' JSON reader (simdjson,
  // which reads up to 64 bytes past the end) parses it in place rather than copying it.
  if (const auto declared = req.get_header_value<std::uint64_t>("Content-Length");
      declared > 0 && declared <= limit) {
    body->reserve(static_cast<std::size_t>(declared) + kParsePadding);
  }
  bool ok = false;
  if (req.is_multipart_form_data()) {
    // httplib parses multipart bodies itself and only when asked for parts: refuse every part.
    ok = reader([](const httplib::MultipartFormData&) { return false; },
                [](const char*, std::size_t) { return false; });
  } else {
    ok = reader(append);
  }
  if (too_large) return BodyRead::kTooLarge;
  return ok && !req.is_multipart_form_data() ? BodyRead::kOk : BodyRead::kFailed;
}

}  // namespace gapless::server::front_door
