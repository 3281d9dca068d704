#include "metrics.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace gapless::bench {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

struct Sums {
  double alloc = 0, amount = 0, ratio = 0;
  int n = 0, ratio_n = 0;
  void add(const Sums& o) {
    alloc += o.alloc;
    amount += o.amount;
    ratio += o.ratio;
    n += o.n;
    ratio_n += o.ratio_n;
  }
};

}  // namespace

double round_half_even(double x, int digits) {
  const double scale = std::pow(10.0, digits);
  // Rounding the scaled value to 9 significant decimals first absorbs binary noise such as
  // 0.125 * 100 = 12.499999..., so exact decimal halves go to even as Python's do.
  const double scaled = std::round(x * scale * 1e6) / 1e6;
  return std::nearbyint(scaled) / scale;  // the default rounding mode is to-nearest-even
}

Curve bucket(const std::vector<Event>& events, std::int64_t capacity_milli) {
  std::array<Sums, kBuckets> by{};
  const double cap = static_cast<double>(capacity_milli);
  for (const Event& e : events) {
    const double arrived = round_half_even(100.0 * e.arrived_milli / cap, 0);
    if (arrived < 0 || arrived >= kBuckets) continue;
    Sums& s = by[static_cast<int>(arrived)];
    s.alloc += round_half_even(100.0 * e.used_milli / cap, 2);
    s.amount += round_half_even(100.0 * e.frag_milli / cap, 2);
    const double idle = cap - static_cast<double>(e.used_milli);
    if (idle > 0) {
      s.ratio += round_half_even(100.0 * e.frag_milli / idle, 2);
      ++s.ratio_n;
    }
    ++s.n;
  }
  Curve c;
  for (int a = 0; a < kBuckets; ++a) {
    Sums s = by[a];
    if (s.n == 0) {
      for (int b = std::max(0, a - 1); b <= std::min(kBuckets - 1, a + 1); ++b) s.add(by[b]);
    }
    c.alloc[a] = s.n ? round_half_even(s.alloc / s.n, 2) : kNaN;
    c.frag_amount[a] = s.n ? round_half_even(s.amount / s.n, 2) : kNaN;
    c.frag_ratio[a] = s.ratio_n ? round_half_even(s.ratio / s.ratio_n, 2) : kNaN;
  }
  return c;
}

Summary summarize(const std::vector<double>& values) {
  std::vector<double> v;
  for (double x : values) {
    if (!std::isnan(x)) v.push_back(x);
  }
  Summary s;
  s.n = static_cast<int>(v.size());
  if (v.empty()) {
    s.mean = s.sd = s.median = kNaN;
    return s;
  }
  for (double x : v) s.mean += x;
  s.mean /= s.n;
  if (s.n > 1) {
    double sq = 0;
    for (double x : v) sq += (x - s.mean) * (x - s.mean);
    s.sd = std::sqrt(sq / (s.n - 1));
  }
  std::sort(v.begin(), v.end());
  s.median = s.n % 2 ? v[s.n / 2] : (v[s.n / 2 - 1] + v[s.n / 2]) / 2;
  return s;
}

}  // namespace gapless::bench
