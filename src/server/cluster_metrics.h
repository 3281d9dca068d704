// The cluster metrics computed at scrape time from placement::ClusterSummary: built afresh as
// Prometheus families on every scrape (no state, so a GPU model that left the cluster leaves the
// output too). Private to the server. Pure functions; thread-safe.
#pragma once

#include <prometheus/metric_family.h>

#include <vector>

#include "gapless/placement/cluster_summary.h"

namespace gapless::server {

struct MixStatus {
  double pods_observed = 0;
  double age_seconds = 0;  // since the learned mix last changed (or the extender started)
};

std::vector<prometheus::MetricFamily> cluster_families(const placement::ClusterSummary& s,
                                                       const MixStatus& mix);

}  // namespace gapless::server
