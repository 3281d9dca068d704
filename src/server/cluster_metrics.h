// The cluster metrics computed at scrape time from placement::ClusterSummary: built afresh as
// Prometheus families on every scrape (no state, so a GPU model that left the cluster leaves the
// output too). Private to the server. Pure functions; thread-safe.
#pragma once

#include <prometheus/metric_family.h>

#include <vector>

#include "gapless/placement/cluster_summary.h"
#include "gapless/placement/quota.h"

namespace gapless::server {

struct MixStatus {
  double pods_observed = 0;
  double age_seconds = 0;  // since the learned mix last changed (or the extender started)
};

std::vector<prometheus::MetricFamily> cluster_families(const placement::ClusterSummary& s,
                                                       const MixStatus& mix);

// Pods waiting for a drain target and the nodes held for them (docs/policies.md "Waiting pods").
struct WaitStatus {
  double waiting = 0;         // pods recorded as waiting (placement::Scheduler::waiting)
  double reserved_nodes = 0;  // 1 while the oldest of them holds a node, else 0
  double held_rooms = 0;      // nodes consolidation freed and keeps for a waiting pod
};

// gapless_waiting_pods, gapless_drain_reserved_nodes and gapless_consolidation_held_rooms.
std::vector<prometheus::MetricFamily> waiting_families(const WaitStatus& w);

// gapless_quota_used and gapless_quota_limit, a series per placement::QuotaRow (labels quota,
// namespace, resource, model); no families when the policy has no quotas.
std::vector<prometheus::MetricFamily> quota_families(const std::vector<placement::QuotaRow>& rows);

}  // namespace gapless::server
