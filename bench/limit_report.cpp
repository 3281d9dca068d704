// The limit in gapless-bench's output (limit_report.h).
#include "limit_report.h"

#include "report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>
#include <vector>

namespace gapless::bench {
namespace {

Summary over_seeds(const LimitCell& cell, double Limit::*field) {
  std::vector<double> v;
  for (const Limit& l : cell.limits) v.push_back(l.*field);
  return summarize(v);
}

// The fields every limit line has: "limit":true, trace, policy, seeds, unallocated statistics.
std::string head(const LimitCell& cell, const std::string& policy, double Limit::*field) {
  std::vector<double> v;
  for (const Limit& l : cell.limits) v.push_back(l.*field);
  const Summary s = summarize(v);
  const double lo = v.empty() ? NAN : *std::min_element(v.begin(), v.end());
  const double hi = v.empty() ? NAN : *std::max_element(v.begin(), v.end());
  std::ostringstream o;
  o << "{\"limit\":true,\"trace\":" << json_quoted(cell.trace)
    << ",\"policy\":" << json_quoted(policy) << ",\"seeds\":[";
  for (std::size_t i = 0; i < cell.seeds.size(); ++i) o << (i ? "," : "") << cell.seeds[i];
  o << "],\"unallocated_mean\":" << json_number(s.mean, 3)
    << ",\"unallocated_sd\":" << json_number(s.sd, 3)
    << ",\"unallocated_min\":" << json_number(lo, 3)
    << ",\"unallocated_max\":" << json_number(hi, 3);
  return o.str();
}

std::string first_error(const LimitCell& cell) {
  for (const Limit& l : cell.limits)
    if (!l.error.empty()) return l.error;
  return "";
}

// How often each offline packing won: {"lp-plan":7,"engine-lp-first":3}.
std::string methods(const LimitCell& cell) {
  std::map<std::string, int> wins;
  for (const Limit& l : cell.limits) wins[l.offline_method] += 1;
  std::string out = "{";
  for (const auto& [method, n] : wins)
    out += (out.size() > 1 ? "," : "") + json_quoted(method) + ":" + std::to_string(n);
  return out + "}";
}

}  // namespace

Summary bound_summary(const LimitCell& cell) {
  return over_seeds(cell, &Limit::bound_pct);
}
Summary offline_summary(const LimitCell& cell) {
  return over_seeds(cell, &Limit::offline_pct);
}

std::string limit_json_lines(const LimitCell& cell) {
  std::vector<double> seconds;
  int columns = 0, rows = 0;
  for (const Limit& l : cell.limits) {
    seconds.push_back(l.lp_seconds);
    columns = std::max(columns, l.lp_columns);
    rows = std::max(rows, l.lp_rows);
  }
  const std::string error = first_error(cell);
  const std::string tail = error.empty() ? "}" : ",\"error\":" + json_quoted(error) + "}";
  std::ostringstream o;
  o << head(cell, "lp-bound", &Limit::bound_pct)
    << ",\"lp_seconds_mean\":" << json_number(summarize(seconds).mean, 3) << ",\"lp_seconds_max\":"
    << json_number(seconds.empty() ? NAN : *std::max_element(seconds.begin(), seconds.end()), 3)
    << ",\"lp_columns\":" << columns << ",\"lp_rows\":" << rows << tail << "\n"
    << head(cell, "offline", &Limit::offline_pct) << ",\"methods\":" << methods(cell) << tail;
  return o.str();
}

}  // namespace gapless::bench
