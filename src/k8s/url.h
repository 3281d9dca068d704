// Percent-encoding for the URLs the informers and the binder build (private to src/k8s).
#pragma once

#include <string>
#include <string_view>

namespace gapless::k8s {

// Encodes every byte outside RFC 3986's unreserved set (A-Z a-z 0-9 - . _ ~), so the result is
// safe both as a path segment and as a query value: "a/b c" -> "a%2Fb%20c".
inline std::string url_encode(std::string_view s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size());
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    const bool unreserved = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
                            (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' || c == '~';
    if (unreserved) {
      out += ch;
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 0x0F];
    }
  }
  return out;
}

}  // namespace gapless::k8s
