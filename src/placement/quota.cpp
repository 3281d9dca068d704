#include "gapless/placement/quota.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <set>

#include "gapless/model/gpu.h"

namespace gapless::placement {
namespace {

// Compute slices of a MIG profile: the N of "Ng.<memory>" in every family's names (a 3g.40gb
// instance holds 3 of the GPU's 7 compute slices whatever its memory slices).
std::int64_t mig_compute_slices(std::string_view profile) {
  std::int64_t n = 0;
  std::size_t i = 0;
  while (i < profile.size() && std::isdigit(static_cast<unsigned char>(profile[i])) && n < 100) {
    n = n * 10 + (profile[i++] - '0');
  }
  return i < profile.size() && profile[i] == 'g' ? n : 0;
}

std::string gpu_model(const model::Node* node, int index) {
  if (node == nullptr || node->gpus.empty()) return "";
  // MIG pool grants (index -1) name no GPU: GFD nodes' GPUs are all of one model.
  if (index < 0 || index >= static_cast<int>(node->gpus.size())) index = 0;
  return model::model_key(node->gpus[static_cast<std::size_t>(index)].model);
}

// Usage of the tenant a quota sees for `ns`: the namespace alone, or all of the quota's. With a
// selector, the namespaces holding anything are the only ones whose usage can add up.
NamespaceUsage tenant_usage(const Quota& q, const QuotaView& view, const std::string& ns) {
  if (q.each) return view.ledger.of(ns);
  NamespaceUsage sum;
  if (!q.namespace_selector) {
    for (const std::string& n : q.namespaces) sum += view.ledger.of(n);
    return sum;
  }
  for (const auto& [n, use] : view.ledger.holding()) {
    if (quota_covers(q, view, n)) sum += use;
  }
  return sum;
}

std::string reason(const Quota& q, const std::string& ns, QuotaResource r, std::int64_t used,
                   std::int64_t limit, std::int64_t ask, const std::string& what_extra) {
  return "gapless: namespace " + ns + " over quota \"" + q.name + "\": " + std::to_string(used) +
         " of " + std::to_string(limit) + " " + std::string(quota_words(r)) + what_extra +
         " in use, pod asks " + std::to_string(ask);
}

// The first limit in `limits` that `used` + `ask` exceeds, as a reason; empty if none.
std::string check_limits(const Quota& q, const std::string& ns, const QuotaLimits& limits,
                         const QuotaAmounts& used, const QuotaAmounts& ask,
                         const std::string& what_extra) {
  for (QuotaResource r : kAllQuotaResources) {
    if (ask[r] <= 0 || !limits[r]) continue;
    if (used[r] + ask[r] > *limits[r])
      return reason(q, ns, r, used[r], *limits[r], ask[r], what_extra);
  }
  return "";
}

std::int64_t percent_limit(double percent, std::int64_t cluster_gpus) {
  // Rounded down, with a little slack so 33.333...% of 30 GPUs is 10, not 9.
  return static_cast<std::int64_t>(
      std::floor(percent * static_cast<double>(cluster_gpus) / 100.0 + 1e-9));
}

std::string check_all_models(const Quota& q, const QuotaView& view, const std::string& ns,
                             const NamespaceUsage& used, const QuotaAmounts& ask) {
  if (std::string why = check_limits(q, ns, q.limits, used.all, ask, ""); !why.empty()) return why;
  const std::int64_t want = ask[QuotaResource::kWholeGpus];
  if (!q.whole_gpus_percent || want <= 0) return "";
  const std::int64_t limit = percent_limit(*q.whole_gpus_percent, view.cluster_gpus);
  const std::int64_t held = used.all[QuotaResource::kWholeGpus];
  if (held + want <= limit) return "";
  char pct[32];
  std::snprintf(pct, sizeof pct, "%g", *q.whole_gpus_percent);
  return reason(q, ns, QuotaResource::kWholeGpus, held, limit, want,
                " (" + std::string(pct) + "% of the cluster's " +
                    std::to_string(view.cluster_gpus) + " GPUs)");
}

std::string check_model(const Quota& q, const std::string& ns, const NamespaceUsage& used,
                        const std::string& gpu_model, const QuotaAmounts& ask) {
  for (const auto& [name, limits] : q.per_model) {
    if (model::model_key(name) != gpu_model) continue;
    auto it = used.by_model.find(gpu_model);
    const QuotaAmounts held = it == used.by_model.end() ? QuotaAmounts{} : it->second;
    if (std::string why = check_limits(q, ns, limits, held, ask, " of model " + name);
        !why.empty()) {
      return why;
    }
  }
  return "";
}

}  // namespace

namespace {

// Per resource, in enum order: its metric label and the words reasons use.
struct ResourceNames {
  std::string_view label, words;
};
constexpr std::array<ResourceNames, kQuotaResources> kResourceNames = {{
    {"whole_gpus", "whole GPUs"},
    {"vram_mib", "MiB of shared vRAM"},
    {"compute_milli", "milli-GPU of shared compute"},
    {"mig_slices", "MIG compute slices"},
}};

}  // namespace

std::string_view quota_label(QuotaResource r) {
  return kResourceNames[static_cast<std::size_t>(r)].label;
}

std::string_view quota_words(QuotaResource r) {
  return kResourceNames[static_cast<std::size_t>(r)].words;
}

QuotaAmounts& QuotaAmounts::operator+=(const QuotaAmounts& o) {
  for (std::size_t i = 0; i < kQuotaResources; ++i) of[i] += o.of[i];
  return *this;
}

QuotaAmounts& QuotaAmounts::operator-=(const QuotaAmounts& o) {
  for (std::size_t i = 0; i < kQuotaResources; ++i) of[i] -= o.of[i];
  return *this;
}

bool QuotaAmounts::zero() const {
  return std::all_of(of.begin(), of.end(), [](std::int64_t v) { return v == 0; });
}

bool QuotaLimits::empty() const {
  return std::none_of(max.begin(), max.end(), [](const auto& m) { return m.has_value(); });
}

bool quota_covers(const Quota& q, const QuotaView& view, const std::string& ns) {
  if (std::find(q.namespaces.begin(), q.namespaces.end(), ns) != q.namespaces.end()) return true;
  if (!q.namespace_selector) return false;
  if (view.namespaces != nullptr) {
    if (auto it = view.namespaces->find(ns); it != view.namespaces->end()) {
      return q.namespace_selector->matches(it->second);
    }
  }
  return q.namespace_selector->matches({{model::kNamespaceNameLabel, ns}});
}

NamespaceUsage& NamespaceUsage::operator+=(const NamespaceUsage& o) {
  all += o.all;
  for (const auto& [m, a] : o.by_model) by_model[m] += a;
  return *this;
}

NamespaceUsage& NamespaceUsage::operator-=(const NamespaceUsage& o) {
  all -= o.all;
  for (const auto& [m, a] : o.by_model) {
    auto it = by_model.find(m);
    if (it == by_model.end()) continue;
    it->second -= a;
    if (it->second.zero()) by_model.erase(it);
  }
  return *this;
}

QuotaAmounts quota_demand(const model::GpuRequest& req) {
  QuotaAmounts a;
  switch (req.kind) {
    case model::RequestKind::kWhole:
      a[QuotaResource::kWholeGpus] = req.whole;
      break;
    case model::RequestKind::kShared:
      a[QuotaResource::kVramMib] = req.shared.memory_mib * req.shared.count;
      a[QuotaResource::kComputeMilli] =
          static_cast<std::int64_t>(req.shared.compute_milli) * req.shared.count;
      break;
    case model::RequestKind::kMig:
      a[QuotaResource::kMigSlices] = mig_compute_slices(req.mig_profile) * req.mig_count;
      break;
    case model::RequestKind::kGpushare:  // aliyun.com/gpu-mem units: not a quota resource
    case model::RequestKind::kNone:
      break;
  }
  return a;
}

NamespaceUsage quota_usage(const model::Node* node, const model::Allocation& a) {
  NamespaceUsage u;
  auto add = [&](int gpu, QuotaResource r, std::int64_t v) {
    if (v == 0) return;
    u.all[r] += v;
    u.by_model[gpu_model(node, gpu)][r] += v;
  };
  for (const model::GpuGrant& g : a.gpus) {
    if (g.whole()) {
      add(g.index, QuotaResource::kWholeGpus, 1);
      continue;
    }
    add(g.index, QuotaResource::kVramMib, g.memory_mib);
    add(g.index, QuotaResource::kComputeMilli, g.compute_milli);
  }
  for (const model::MigGrant& m : a.mig) {
    add(m.gpu, QuotaResource::kMigSlices, mig_compute_slices(m.profile));
  }
  return u;
}

void QuotaLedger::rebuild(const model::Cluster& c) {
  pods_.clear();
  namespaces_.clear();
  for (const model::Allocation* a : c.allocations()) refresh(c, a->pod_uid);
}

void QuotaLedger::refresh(const model::Cluster& c, const std::string& pod_uid) {
  if (auto it = pods_.find(pod_uid); it != pods_.end()) {
    auto ns = namespaces_.find(it->second.ns);
    ns->second -= it->second.use;
    if (ns->second.all.zero() && ns->second.by_model.empty()) namespaces_.erase(ns);
    pods_.erase(it);
  }
  const model::Allocation* a = c.allocation(pod_uid);
  if (a == nullptr) return;
  Entry e{a->pod_ns, quota_usage(c.find_node(a->node), *a)};
  if (e.use.all.zero()) return;  // holds no quota resource (gpushare, CPU only)
  namespaces_[e.ns] += e.use;
  pods_.emplace(pod_uid, std::move(e));
}

const NamespaceUsage& QuotaLedger::of(const std::string& ns) const {
  static const NamespaceUsage kNone;
  auto it = namespaces_.find(ns);
  return it == namespaces_.end() ? kNone : it->second;
}

std::map<std::string, NamespaceUsage> QuotaLedger::all() const {
  return {namespaces_.begin(), namespaces_.end()};
}

std::string over_quota(const std::vector<Quota>& quotas, const QuotaView& view,
                       const std::string& ns, const QuotaAmounts& ask) {
  if (ask.zero()) return "";
  for (const Quota& q : quotas) {
    if (!quota_covers(q, view, ns)) continue;
    if (std::string why = check_all_models(q, view, ns, tenant_usage(q, view, ns), ask);
        !why.empty()) {
      return why;
    }
  }
  return "";
}

std::string over_model_quota(const std::vector<Quota>& quotas, const QuotaView& view,
                             const std::string& ns, const std::string& gpu_model,
                             const QuotaAmounts& ask) {
  if (ask.zero()) return "";
  const std::string m = model::model_key(gpu_model);
  for (const Quota& q : quotas) {
    if (q.per_model.empty() || !quota_covers(q, view, ns)) continue;
    if (std::string why = check_model(q, ns, tenant_usage(q, view, ns), m, ask); !why.empty()) {
      return why;
    }
  }
  return "";
}

std::unordered_map<std::string, std::string> models_over_quota(const std::vector<Quota>& quotas,
                                                               const QuotaView& view,
                                                               const std::string& ns,
                                                               const QuotaAmounts& ask) {
  std::unordered_map<std::string, std::string> out;
  if (ask.zero()) return out;
  for (const Quota& q : quotas) {
    if (q.per_model.empty() || !quota_covers(q, view, ns)) continue;
    const NamespaceUsage used = tenant_usage(q, view, ns);
    for (const auto& [name, limits] : q.per_model) {
      const std::string key = model::model_key(name);
      auto it = used.by_model.find(key);
      const QuotaAmounts held = it == used.by_model.end() ? QuotaAmounts{} : it->second;
      std::string why = check_limits(q, ns, limits, held, ask, " of model " + name);
      if (!why.empty()) out.emplace(key, std::move(why));  // the first quota's reason wins
    }
  }
  return out;
}

std::string over_quota(const std::vector<Quota>& quotas, const QuotaView& view,
                       const std::string& ns, const NamespaceUsage& adds) {
  if (std::string why = over_quota(quotas, view, ns, adds.all); !why.empty()) return why;
  for (const auto& [m, ask] : adds.by_model) {
    if (std::string why = over_model_quota(quotas, view, ns, m, ask); !why.empty()) return why;
  }
  return "";
}

namespace {

void add_rows(const Quota& q, const QuotaView& view, const std::string& who,
              const NamespaceUsage& used, std::vector<QuotaRow>* out) {
  auto rows = [&](const QuotaLimits& limits, const QuotaAmounts& held, const std::string& model) {
    for (QuotaResource r : kAllQuotaResources) {
      if (limits[r]) {
        out->push_back({q.name, who, std::string(quota_label(r)), model, held[r], *limits[r]});
      }
    }
  };
  QuotaLimits all = q.limits;
  if (q.whole_gpus_percent) {
    const std::int64_t p = percent_limit(*q.whole_gpus_percent, view.cluster_gpus);
    auto& w = all[QuotaResource::kWholeGpus];
    w = w ? std::min(*w, p) : p;
  }
  rows(all, used.all, "");
  for (const auto& [name, limits] : q.per_model) {
    auto it = used.by_model.find(model::model_key(name));
    rows(limits, it == used.by_model.end() ? QuotaAmounts{} : it->second, name);
  }
}

// The namespaces a quota covers that metrics show: those it lists, and those it selects among
// the known ones and those holding anything; by name.
std::set<std::string> covered(const Quota& q, const QuotaView& view) {
  std::set<std::string> out(q.namespaces.begin(), q.namespaces.end());
  if (!q.namespace_selector) return out;
  if (view.namespaces != nullptr) {
    for (const auto& [ns, labels] : *view.namespaces) {
      if (q.namespace_selector->matches(labels)) out.insert(ns);
    }
  }
  for (const auto& [ns, use] : view.ledger.holding()) {
    if (quota_covers(q, view, ns)) out.insert(ns);
  }
  return out;
}

}  // namespace

std::vector<QuotaRow> quota_rows(const std::vector<Quota>& quotas, const QuotaView& view) {
  std::vector<QuotaRow> out;
  for (const Quota& q : quotas) {
    for (const std::string& ns : covered(q, view)) add_rows(q, view, ns, view.ledger.of(ns), &out);
  }
  return out;
}

}  // namespace gapless::placement
