// Namespace GPU quotas: what a policy's `quotas:` section says (plain structs the policy layer
// fills), how much each namespace holds (QuotaLedger, derived from the model's allocations) and
// whether a pod would go over a quota (the check filter and reserve share).
//
// Why not Kubernetes ResourceQuota: it counts only resources nodes advertise (nvidia.com/gpu),
// not vRAM or compute shares, MIG slices by size, or GPUs of one model.
//
// Usage is never counted separately from the model: the ledger holds, per pod holding an
// allocation, what that allocation contributes, and is refreshed from the model for every pod
// whose allocation changed (model::Cluster::Changes::allocations). A policy reload therefore
// changes the limits, never the usage.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "gapless/model/allocation.h"
#include "gapless/model/cluster.h"
#include "gapless/model/labels.h"
#include "gapless/model/request.h"

namespace gapless::placement {

enum class QuotaResource : std::size_t {
  kWholeGpus,     // nvidia.com/gpu: GPUs held whole
  kVramMib,       // gapless.io/gpu-memory: MiB of vRAM held as shares, summed over GPUs
  kComputeMilli,  // gapless.io/gpu-compute: milli-GPU held as shares, summed over GPUs
  kMigSlices,     // nvidia.com/mig-*: compute slices of the instances (3g.40gb counts 3)
};
inline constexpr std::size_t kQuotaResources = 4;
inline constexpr std::array<QuotaResource, kQuotaResources> kAllQuotaResources = {
    QuotaResource::kWholeGpus, QuotaResource::kVramMib, QuotaResource::kComputeMilli,
    QuotaResource::kMigSlices};

// Metric label ("whole_gpus", "vram_mib", "compute_milli", "mig_slices").
std::string_view quota_label(QuotaResource r);
// The words reasons use ("whole GPUs", "MiB of shared vRAM", ...).
std::string_view quota_words(QuotaResource r);

// An amount of each resource (usage, or what a pod asks).
struct QuotaAmounts {
  std::array<std::int64_t, kQuotaResources> of{};
  std::int64_t& operator[](QuotaResource r) { return of[static_cast<std::size_t>(r)]; }
  std::int64_t operator[](QuotaResource r) const { return of[static_cast<std::size_t>(r)]; }
  QuotaAmounts& operator+=(const QuotaAmounts& o);
  QuotaAmounts& operator-=(const QuotaAmounts& o);
  bool zero() const;
  bool operator==(const QuotaAmounts&) const = default;
};

// Limits on each resource; nullopt: not limited.
struct QuotaLimits {
  std::array<std::optional<std::int64_t>, kQuotaResources> max;
  std::optional<std::int64_t>& operator[](QuotaResource r) {
    return max[static_cast<std::size_t>(r)];
  }
  const std::optional<std::int64_t>& operator[](QuotaResource r) const {
    return max[static_cast<std::size_t>(r)];
  }
  bool empty() const;
};

// The namespaces the cluster has, with their labels (the driver's namespace informer keeps
// them): what quotas' namespace selectors are matched against.
using NamespaceLabels = std::unordered_map<std::string, model::Labels>;

struct Quota {
  std::string name;
  // The tenant: pods of these namespaces count, and of every namespace the selector matches
  // (its labels now: a namespace relabelled moves in or out at once). At least one is set.
  std::vector<std::string> namespaces;
  std::optional<model::LabelSelector> namespace_selector;
  // false: the namespaces share one budget; true: each namespace has the limits on its own.
  bool each = false;
  QuotaLimits limits;  // over all GPU models
  // GPU model (case-insensitive, as pods' model lists) -> limits on GPUs of that model only.
  std::map<std::string, QuotaLimits> per_model;
  // Whole GPUs at most this percentage (0..100) of the GPUs in the cluster, rounded down.
  std::optional<double> whole_gpus_percent;
};

// What one namespace holds: over all models, and per GPU model (model::model_key).
struct NamespaceUsage {
  QuotaAmounts all;
  std::map<std::string, QuotaAmounts> by_model;
  NamespaceUsage& operator+=(const NamespaceUsage& o);
  NamespaceUsage& operator-=(const NamespaceUsage& o);
};

// What a pod asks, before placement. Per-model amounts are unknown until GPUs are picked, so
// per-model limits are checked per node (filter) and on the placed allocation (reserve).
QuotaAmounts quota_demand(const model::GpuRequest& req);
// What an allocation holds on `node` (GPU models from the node; null node: model unknown, "").
NamespaceUsage quota_usage(const model::Node* node, const model::Allocation& a);

// Per-namespace usage, kept in step with the model. Not thread-safe: the Scheduler guards it
// with the model's lock.
class QuotaLedger {
 public:
  void rebuild(const model::Cluster& c);
  // Re-reads one pod's allocation from the model (gone: its contribution leaves).
  void refresh(const model::Cluster& c, const std::string& pod_uid);
  // Usage of one namespace; all zero when it holds nothing.
  const NamespaceUsage& of(const std::string& ns) const;
  // Namespaces holding anything, by name.
  std::map<std::string, NamespaceUsage> all() const;
  // The same, unordered and without a copy (sums over a tenant's namespaces).
  const std::unordered_map<std::string, NamespaceUsage>& holding() const { return namespaces_; }

 private:
  struct Entry {
    std::string ns;
    NamespaceUsage use;
  };
  std::unordered_map<std::string, Entry> pods_;
  std::unordered_map<std::string, NamespaceUsage> namespaces_;
};

// What a quota check needs besides the quotas: usage, the cluster's GPU count, and the
// namespaces' labels (null: none known).
struct QuotaView {
  const QuotaLedger& ledger;
  std::int64_t cluster_gpus = 0;
  const NamespaceLabels* namespaces = nullptr;
};

// Whether `q` counts pods of `ns`: listed, or matched by its selector. A namespace the view does
// not know (yet) reads as carrying only the label the API server gives every namespace,
// kubernetes.io/metadata.name=<ns>.
bool quota_covers(const Quota& q, const QuotaView& view, const std::string& ns);

// The first quota `ns` would go over by adding `ask` (over all models), as the reason users
// read: `gapless: namespace ml over quota "team-a": 12 of 12 whole GPUs in use, pod asks 2`.
// Empty when within every quota. Resources the pod does not ask for never refuse it.
std::string over_quota(const std::vector<Quota>& quotas, const QuotaView& view,
                       const std::string& ns, const QuotaAmounts& ask);
// The same for per-model limits: `ask` lands on GPUs of `gpu_model`.
std::string over_model_quota(const std::vector<Quota>& quotas, const QuotaView& view,
                             const std::string& ns, const std::string& gpu_model,
                             const QuotaAmounts& ask);
// Every GPU model (model::model_key) on which `ask` would put `ns` over a per-model limit, with the
// reason; computed once per filter call so the per-node check is a lookup. Usually empty.
std::unordered_map<std::string, std::string> models_over_quota(const std::vector<Quota>& quotas,
                                                               const QuotaView& view,
                                                               const std::string& ns,
                                                               const QuotaAmounts& ask);
// Both checks for an allocation about to be committed.
std::string over_quota(const std::vector<Quota>& quotas, const QuotaView& view,
                       const std::string& ns, const NamespaceUsage& adds);

// Usage and limit per (quota, namespace, resource, model), for metrics: a row for each
// namespace a quota covers (listed, or known and selected) and each limit it sets. `used` is that
// namespace's own usage; a quota shared by several namespaces repeats its limit on each (their
// usages add up against it).
struct QuotaRow {
  std::string quota, ns, resource, model;  // model empty: all models
  std::int64_t used = 0;
  std::int64_t limit = 0;
};
std::vector<QuotaRow> quota_rows(const std::vector<Quota>& quotas, const QuotaView& view);

}  // namespace gapless::placement
