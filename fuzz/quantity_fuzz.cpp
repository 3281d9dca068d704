// Resource quantities (k8s::parse_whole_quantity), checked against a reference: a plain decimal
// integer (leading zeros allowed) no larger than 2^53 parses to its value; anything else is an
// error that quotes the text.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_util.h"
#include "gapless/k8s/quantity.h"

namespace {

// The value, or -1 where parse_whole_quantity must fail.
std::int64_t reference(std::string_view text) {
  if (text.empty() || text.find_first_not_of("0123456789") != std::string_view::npos) return -1;
  const std::size_t first = text.find_first_not_of('0');
  if (first == std::string_view::npos) return 0;
  const std::string_view digits = text.substr(first);
  if (digits.size() > 16) return -1;  // 2^53 = 9007199254740992 has 16 digits
  const std::int64_t v = std::stoll(std::string(digits));
  return v > (std::int64_t{1} << 53) ? -1 : v;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text = gapless::fuzz::as_text(data, size);
  auto q = gapless::k8s::parse_whole_quantity(text);
  const std::int64_t want = reference(text);
  if (want < 0) {
    gapless::fuzz::check(!q.ok(), "accepted a quantity that is not a whole number up to 2^53");
    gapless::fuzz::check(q.error().find(text) != std::string::npos, "an error without the text",
                         q.error());
  } else {
    gapless::fuzz::check(q.ok() && *q == want, "a whole number parsed to the wrong value");
  }
  return 0;
}
