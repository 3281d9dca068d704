// How gapless-bench reports the limit (limit.h) beside the policies: JSON lines with the
// policies' fields, and the summaries the markdown table's two extra columns show.
#pragma once

#include <string>

#include "limit.h"
#include "metrics.h"

namespace gapless::bench {

// Over seeds: the LP's lower bound on unallocated GPU %, and the offline packing's.
Summary bound_summary(const LimitCell& cell);
Summary offline_summary(const LimitCell& cell);

// Two JSON lines (no trailing newline after the second), shaped like a policy's so tables and
// plots read them alike: policy "lp-bound" and policy "offline", each with "limit":true, trace,
// seeds, unallocated_mean, unallocated_sd, unallocated_min, unallocated_max; the bound's also
// lp_seconds_mean, lp_seconds_max, lp_columns and lp_rows (the largest over seeds); "error" where
// a seed's LP failed (its bound is then 0 %) or its packing failed its checks; the offline
// line also "methods", how many seeds each offline packing won.
std::string limit_json_lines(const LimitCell& cell);

}  // namespace gapless::bench
