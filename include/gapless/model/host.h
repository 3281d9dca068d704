// CPU and host memory next to the GPUs, as kube-scheduler's NodeResourcesFit sees them.
//
// Gapless's extender leaves these at zero: kube-scheduler checks CPU and memory itself. The trace
// bench fills them in, because a replay has no kube-scheduler in front of it. Zero capacity on a
// node means "not tracked": nothing is checked against it.
#pragma once

#include <cstdint>

namespace gapless::model {

struct HostResources {
  std::int64_t cpu_milli = 0;
  std::int64_t memory_mib = 0;
  bool operator==(const HostResources&) const = default;
};

}  // namespace gapless::model
