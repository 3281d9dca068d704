#include "consolidation_reader.h"

#include <cmath>
#include <limits>

namespace gapless::policy::detail {
namespace {

const Keys kConsolidationKeys = {"enabled",         "dryRun",    "movablePriorityBelow",
                                 "maxMovesPerPlan", "rateLimit", "holdSeconds"};
const Keys kRateKeys = {"perMinute", "perNamespacePerMinute", "podCooldownSeconds"};

bool read_bool(YamlReader& r, const Field& f, bool* out) {
  const std::string v = f.value.IsScalar() ? f.value.Scalar() : "";
  if (v == "true" || v == "false") {
    *out = v == "true";
    return true;
  }
  return r.fail(f.mark(), f.path, "expected true or false, got " + describe(f.value));
}

// A whole number in [min, max].
bool read_whole(YamlReader& r, const Field& f, double min, double max, const char* what,
                double* out) {
  if (!f.value.IsScalar()) {
    return r.fail(f.mark(), f.path, std::string("expected ") + what + ", got " + describe(f.value));
  }
  double v = 0;
  const std::string& s = f.value.Scalar();
  try {
    std::size_t used = 0;
    v = std::stod(s, &used);
    if (used != s.size()) v = std::numeric_limits<double>::quiet_NaN();
  } catch (const std::exception&) {
    v = std::numeric_limits<double>::quiet_NaN();
  }
  if (!std::isfinite(v) || v != std::floor(v) || v < min || v > max) {
    return r.fail(f.mark(), f.path,
                  std::string("expected ") + what + " (a whole number from " +
                      std::to_string(static_cast<long long>(min)) + " to " +
                      std::to_string(static_cast<long long>(max)) + "), got " + describe(f.value));
  }
  *out = v;
  return true;
}

bool read_rate(YamlReader& r, const Field& f, placement::ConsolidationRules* out) {
  Fields fields;
  if (!r.read_map(f.value, f.mark(), f.path, &kRateKeys, true, &fields)) return false;
  double v = 0;
  for (const Field& k : fields) {
    if (k.key == "perMinute") {
      if (!read_whole(r, k, 0, 10000, "evictions per minute (0: no limit)", &v)) return false;
      out->per_minute = static_cast<int>(v);
    } else if (k.key == "perNamespacePerMinute") {
      if (!read_whole(r, k, 0, 10000, "evictions per minute (0: no limit)", &v)) return false;
      out->per_namespace_per_minute = static_cast<int>(v);
    } else {
      if (!read_whole(r, k, 0, 30 * 86400, "seconds", &v)) return false;
      out->pod_cooldown_s = v;
    }
  }
  return true;
}

}  // namespace

bool read_consolidation(YamlReader& r, const Field& f, placement::ConsolidationRules* out) {
  Fields fields;
  if (!r.read_map(f.value, f.mark(), f.path, &kConsolidationKeys, true, &fields)) return false;
  double v = 0;
  for (const Field& k : fields) {
    if (k.key == "enabled" && !read_bool(r, k, &out->enabled)) return false;
    if (k.key == "dryRun" && !read_bool(r, k, &out->dry_run)) return false;
    if (k.key == "movablePriorityBelow") {
      // spec.priority is an int32; user PriorityClasses stay within +-1e9.
      if (!read_whole(r, k, -2147483648.0, 2147483647.0, "a pod priority", &v)) return false;
      out->movable_below_priority = static_cast<std::int32_t>(v);
    }
    if (k.key == "maxMovesPerPlan") {
      if (!read_whole(r, k, 1, 8, "evictions per plan", &v)) return false;
      out->max_moves = static_cast<int>(v);
    }
    if (k.key == "rateLimit" && !read_rate(r, k, out)) return false;
    if (k.key == "holdSeconds") {
      if (!read_whole(r, k, 0, 3600, "seconds", &v)) return false;
      out->hold_s = v;
    }
  }
  return true;
}

}  // namespace gapless::policy::detail
