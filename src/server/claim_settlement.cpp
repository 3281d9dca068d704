#include "gapless/server/claim_settlement.h"

#include <charconv>

namespace gapless::server {

k8s::ClaimSettlement claim_settlement(const placement::Scheduler& scheduler,
                                      const k8s::ClusterSync& sync, const k8s::Informer& pods) {
  k8s::ClaimSettlement s;
  s.settled_at = [&scheduler, &sync](const model::Allocation& claimed) {
    // The confirmation first: once confirmed, the model holds the API server's record until the
    // pod is gone, so an allocation equal to the claim is that record.
    // A pod seen gone holds nothing, whatever it claimed.
    if (std::optional<std::uint64_t> gone = sync.departed_at(claimed.pod_uid)) return gone;
    std::optional<std::uint64_t> at = sync.confirmed_at(claimed.pod_uid);
    if (!at) return at;
    bool same = false;
    scheduler.read([&](const model::Cluster& c) {
      const model::Allocation* held = c.allocation(claimed.pod_uid);
      same = held != nullptr && held->node == claimed.node && held->gpus == claimed.gpus &&
             held->mig == claimed.mig;
    });
    return same ? at : std::nullopt;
  };
  s.seen_through = [&pods]() -> std::uint64_t {
    const std::string rv = pods.resource_version();
    std::uint64_t v = 0;
    (void)std::from_chars(rv.data(), rv.data() + rv.size(), v);
    return v;
  };
  return s;
}

}  // namespace gapless::server
