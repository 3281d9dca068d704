#include "gapless/k8s/quantity.h"

#include <cmath>
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

Result<std::int64_t> parse_host_quantity(std::string_view text, HostUnit unit) {
  // <decimal number>[<suffix>]: binary Ki..Ei, decimal n u m k M G T P E, or an exponent e<N>.
  std::size_t i = 0;
  long double value = 0;
  bool digits = false;
  while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
    value = value * 10 + (text[i++] - '0');
    digits = true;
  }
  if (i < text.size() && text[i] == '.') {
    long double place = 0.1L;
    for (++i; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i, place /= 10) {
      value += (text[i] - '0') * place;
      digits = true;
    }
  }
  if (!digits) return bad(text, "must be a Kubernetes quantity such as 500m, 2, 1.5 or 8Gi");
  const std::string_view suffix = text.substr(i);
  static const std::pair<std::string_view, long double> kSuffixes[] = {
      {"", 1},
      {"n", 1e-9L},
      {"u", 1e-6L},
      {"m", 1e-3L},
      {"k", 1e3L},
      {"M", 1e6L},
      {"G", 1e9L},
      {"T", 1e12L},
      {"P", 1e15L},
      {"E", 1e18L},
      {"Ki", 1024.0L},
      {"Mi", 1048576.0L},
      {"Gi", 1073741824.0L},
      {"Ti", 1099511627776.0L},
      {"Pi", 1125899906842624.0L},
      {"Ei", 1152921504606846976.0L}};
  long double scale = -1;
  for (const auto& [name, factor] : kSuffixes) {
    if (suffix == name) scale = factor;
  }
  if (scale < 0 && suffix.size() >= 2 && (suffix[0] == 'e' || suffix[0] == 'E')) {
    const Result<std::int64_t> exp = parse_whole_quantity(
        suffix[1] == '-' || suffix[1] == '+' ? suffix.substr(2) : suffix.substr(1));
    if (exp.ok() && *exp <= 30) scale = std::pow(10.0L, suffix[1] == '-' ? -*exp : *exp);
  }
  if (scale < 0) return bad(text, "has an unknown unit suffix");
  // In the unit asked for, rounded up as Kubernetes rounds (MilliValue, Value).
  const long double in_unit =
      unit == HostUnit::kMilli ? value * scale * 1000 : value * scale / 1048576.0L;
  const long double rounded = std::ceil(in_unit - 1e-9L);
  if (rounded > static_cast<long double>(kMaxQuantity)) {
    return bad(text, "must be at most " + std::to_string(kMaxQuantity) + " in its unit");
  }
  return static_cast<std::int64_t>(rounded);
}

}  // namespace gapless::k8s
