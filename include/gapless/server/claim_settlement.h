// Which claims are settled (k8s::ClaimSettlement, docs/high-availability.md "Claims"): a claim is
// settled once this replica's pod informer has delivered its pod bound with exactly the claimed
// grants, or gone; how far the informer has delivered is its resourceVersion.
#pragma once

#include "gapless/k8s/cluster_sync.h"
#include "gapless/k8s/informer.h"
#include "gapless/k8s/node_claims.h"
#include "gapless/placement/scheduler.h"

namespace gapless::server {

// `sync` and `pods` (the informer feeding `sync`) must outlive what is returned.
k8s::ClaimSettlement claim_settlement(const placement::Scheduler& scheduler,
                                      const k8s::ClusterSync& sync, const k8s::Informer& pods);

}  // namespace gapless::server
