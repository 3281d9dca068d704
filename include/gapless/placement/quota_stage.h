// Namespace quotas as a stage of the runner (placement/stage.h); the quota arithmetic itself is
// placement/quota.h. The stage keeps per-namespace usage current with the model, and the
// namespaces' labels that quotas' selectors match.
//
//   PreFilter   a pod its namespace's quota refuses is unresolvable on every node (evicting
//               other tenants' pods cannot help), with the quota named in the reason
//   Filter      per-model limits refuse the nodes whose GPUs the pod could use are all of
//               models over their limit
//   PreReserve  on a node of several models, the pick avoids those over their limit
//   Reserve     what the pick chose must not put the namespace over a quota of the current
//               policy (two pods of one tenant that both passed filter: the second is refused)
//   Start, ModelChanged   usage follows the allocations
//
// Thread-safety: as Stage; the namespace setters and quota_rows follow the runner's lock (write,
// read).
#pragma once

#include "gapless/placement/stage.h"

namespace gapless::placement {

class QuotaStage final : public Stage {
 public:
  std::string_view name() const override { return "quotas"; }
  std::optional<FilterResult::Reason> pre_filter(const StageCall& call) const override;
  void filter(const StageCall& call, FilterResult* r,
              std::vector<const model::Node*>* passed_nodes) const override;
  std::string pre_reserve(const StageCall& call, const std::string& node,
                          model::GpuRequest* fit) const override;
  std::string reserve(const StageCall& call, const std::string& node,
                      const model::Allocation& picked) const override;
  void start(const model::Cluster& cluster) override { usage_.rebuild(cluster); }
  void model_changed(const model::Cluster& cluster, const model::Cluster::Changes& changes,
                     const std::vector<const model::Node*>& touched) override;

  // The cluster's namespaces and their labels (a full list replaces what was known). A change
  // applies to the next call: usage is not moved.
  void set_namespaces(NamespaceLabels all) { namespaces_ = std::move(all); }
  void set_namespace(const std::string& ns, model::Labels labels);
  void erase_namespace(const std::string& ns) { namespaces_.erase(ns); }
  // Why `ask` goes over a quota of `ns` even with nothing of the tenant running (the limit is
  // below the ask itself); empty when some moment could admit it. The admission webhook refuses
  // such a pod at creation instead of leaving it Pending forever.
  std::string never_fits(const std::vector<Quota>& quotas, std::int64_t cluster_gpus,
                         const std::string& ns, const QuotaAmounts& ask) const;
  // Usage and limits of `quotas`, per namespace (for metrics).
  std::vector<QuotaRow> rows(const std::vector<Quota>& quotas, std::int64_t cluster_gpus) const;

 private:
  QuotaView view(std::int64_t cluster_gpus) const { return {usage_, cluster_gpus, &namespaces_}; }

  QuotaLedger usage_;
  NamespaceLabels namespaces_;
};

}  // namespace gapless::placement
