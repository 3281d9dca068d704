// Kubernetes resource quantities, as far as Gapless needs them.
#pragma once

#include <cstdint>
#include <string_view>

#include "gapless/model/result.h"

namespace gapless::k8s {

// GPU resources are counts, MiB or milli-units: a plain non-negative decimal integer
// ("2", "8192"). Suffixed or fractional forms ("8Gi", "500m", "1.5", "1e3"), signs, blanks and
// values above 2^53 are errors whose message quotes the value.
Result<std::int64_t> parse_whole_quantity(std::string_view text);

enum class HostUnit { kMilli, kMiB };
// CPU and memory: any Kubernetes quantity ("500m", "2", "1.5", "8Gi", "129e6"), in milli-units
// (CPU) or MiB (memory), rounded up. Negative values and unknown suffixes are errors.
Result<std::int64_t> parse_host_quantity(std::string_view text, HostUnit unit);

}  // namespace gapless::k8s
