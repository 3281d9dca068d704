#include "gapless/k8s/quantity.h"

#include <string>

namespace gapless::k8s {

namespace {

constexpr std::int64_t kMaxQuantity = std::int64_t{1} << 53;

Error bad(std::string_view text, const std::string& what) {
  return Error{what + ", got \"" + std::string(text) + "\""};
}

}  // namespace

Result<std::int64_t> parse_whole_quantity(std::string_view text) {
  if (text.empty()) return bad(text, "must be a whole number");
  for (char c : text) {
    if (c < '0' || c > '9') return bad(text, "must be a whole number");
  }
  std::int64_t value = 0;
  for (char c : text) {
    value = value * 10 + (c - '0');
    // Checked per digit so that a long string cannot overflow before the comparison.
    if (value > kMaxQuantity) return bad(text, "must be at most " + std::to_string(kMaxQuantity));
  }
  return value;
}

}  // namespace gapless::k8s
