// The FGD paper's metrics (docs/packing-benchmark.md §2.3-2.4): per pod event the GPU allocation,
// the arrived GPU request and the fragmentation, then bucketed to integer arrived % the way the
// authors' merge scripts do, then summarised over seeds.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

namespace gapless::bench {

// The cluster after one pod event (placed or failed), in milli-GPU.
struct Event {
  std::int64_t arrived_milli = 0;  // GPU request of every pod submitted so far, failed ones too
  std::int64_t used_milli = 0;     // GPU allocated
  double frag_milli = 0;           // F(M) under the trace's typical pods (the oracle mix)
};

inline constexpr int kBuckets = 131;  // arrived % 0..130

// Per integer arrived %: the mean over the events that round to it; NaN where none does.
struct Curve {
  std::array<double, kBuckets> alloc;        // GPU allocation %
  std::array<double, kBuckets> frag_amount;  // F(M) as % of cluster GPU capacity
  std::array<double, kBuckets> frag_ratio;   // F(M) as % of idle GPU
};

// Python's round(x, digits): half to even on the decimal value (near enough for floats).
double round_half_even(double x, int digits);

// §2.4: each event's arrived % is rounded to an integer (half to even) and its metrics to two
// decimals; bucket a is the mean of the events rounded to a, or, when there are none, of those
// rounded to a-1..a+1; the mean is rounded to two decimals.
Curve bucket(const std::vector<Event>& events, std::int64_t capacity_milli);

struct Summary {
  double mean = 0;
  double sd = 0;  // sample standard deviation (n - 1), 0 for fewer than two values
  double median = 0;
  int n = 0;  // values that were not NaN
};
// Over the non-NaN values; all NaN (or none) gives n = 0 and NaN statistics.
Summary summarize(const std::vector<double>& values);

}  // namespace gapless::bench
