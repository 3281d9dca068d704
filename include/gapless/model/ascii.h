// ASCII case folding for names the wire and the policy match case-insensitively: JSON keys (as
// Go's decoder matches them), HTTP header names and values, GPU model names.
//
// Not std::tolower: that reads the C locale's table (a process that sets a locale would fold
// other bytes too) and costs a call per character. Not boost::algorithm::iequals /
// to_lower_copy with the classic locale either: they look the ctype facet up per character,
// 4 to 5 times the hand-written loop's cost, and model names are compared per GPU on the
// engine's path. Bytes outside A-Z (UTF-8 included) are left as they are.
#pragma once

#include <string>
#include <string_view>

namespace gapless::model {

constexpr char ascii_lower(char c) {
  return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
}

inline std::string ascii_lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = ascii_lower(c);
  return out;
}

// a == b but for the case of ASCII letters; allocates nothing.
constexpr bool ascii_iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (ascii_lower(a[i]) != ascii_lower(b[i])) return false;
  }
  return true;
}

}  // namespace gapless::model
