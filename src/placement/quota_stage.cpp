#include "gapless/placement/quota_stage.h"

#include <algorithm>

#include "gapless/placement/demand.h"

namespace gapless::placement {

std::optional<FilterResult::Reason> QuotaStage::pre_filter(const StageCall& call) const {
  if (call.quotas.empty()) return std::nullopt;
  std::string why =
      over_quota(call.quotas, view(call.cluster_gpus), call.pod.ns, quota_demand(call.req));
  if (why.empty()) return std::nullopt;
  return FilterResult::Reason{std::move(why), "over_quota", true};
}

std::string QuotaStage::never_fits(const std::vector<Quota>& quotas, std::int64_t cluster_gpus,
                                   const std::string& ns, const QuotaAmounts& ask) const {
  const QuotaLedger nothing_running;
  return over_quota(quotas, QuotaView{nothing_running, cluster_gpus, &namespaces_}, ns, ask);
}

void QuotaStage::filter(const StageCall& call, FilterResult* r,
                        std::vector<const model::Node*>* passed_nodes) const {
  if (call.quotas.empty()) return;
  const auto over =
      models_over_quota(call.quotas, view(call.cluster_gpus), call.pod.ns, quota_demand(call.req));
  if (over.empty()) return;  // the common case: no per-model work per node
  std::vector<std::string> passed;
  std::vector<const model::Node*> kept_nodes;
  for (std::size_t i = 0; i < r->passed.size(); ++i) {
    std::string& name = r->passed[i];
    // The node fails when every model it could serve the pod with is over its limit; a node
    // with several models may pass, and reserve then checks the GPUs actually picked.
    const std::string* why = nullptr;
    bool some_model_ok = false;
    const model::Node* node = (*passed_nodes)[i];
    static const std::vector<model::Gpu> kNoGpus;
    for (const model::Gpu& g : node != nullptr ? node->gpus : kNoGpus) {
      if (!can_serve(g, call.req)) continue;
      auto it = over.find(model::model_key(g.model));
      if (it == over.end()) {
        some_model_ok = true;
        break;
      }
      if (why == nullptr) why = &it->second;
    }
    if (some_model_ok || why == nullptr) {
      passed.push_back(std::move(name));
      kept_nodes.push_back(node);
      continue;
    }
    auto it = std::find_if(r->reasons.begin(), r->reasons.end(),
                           [&](const FilterResult::Reason& x) { return x.text == *why; });
    if (it == r->reasons.end())
      it = r->reasons.insert(r->reasons.end(), {*why, "over_quota", true});
    r->rejected.push_back({std::move(name), static_cast<std::size_t>(it - r->reasons.begin())});
  }
  r->passed = std::move(passed);
  *passed_nodes = std::move(kept_nodes);
}

std::string QuotaStage::pre_reserve(const StageCall& call, const std::string& node_name,
                                    model::GpuRequest* fit) const {
  // The quotas in force now (filter may have run under an older policy), against usage that
  // includes every reservation made since that filter.
  if (call.quotas.empty()) return "";
  const auto over =
      models_over_quota(call.quotas, view(call.cluster_gpus), call.pod.ns, quota_demand(*fit));
  const model::Node* node = call.cluster.find_node(node_name);
  if (over.empty() || node == nullptr) return "";
  std::vector<std::string> allowed;
  const std::string* why = nullptr;
  for (const model::Gpu& g : node->gpus) {
    if (!can_serve(g, *fit)) continue;
    if (auto it = over.find(model::model_key(g.model)); it != over.end()) {
      if (why == nullptr) why = &it->second;
    } else if (std::find(allowed.begin(), allowed.end(), g.model) == allowed.end()) {
      allowed.push_back(g.model);
    }
  }
  if (why == nullptr) return "";  // no GPU of a model over its limit could be picked
  if (allowed.empty()) return *why;
  fit->models = std::move(allowed);
  return "";
}

std::string QuotaStage::reserve(const StageCall& call, const std::string& node,
                                const model::Allocation& picked) const {
  if (call.quotas.empty()) return "";
  return over_quota(call.quotas, view(call.cluster_gpus), call.pod.ns,
                    quota_usage(call.cluster.find_node(node), picked));
}

void QuotaStage::model_changed(const model::Cluster& cluster,
                               const model::Cluster::Changes& changes,
                               const std::vector<const model::Node*>& /*touched*/) {
  for (const std::string& uid : changes.allocations) usage_.refresh(cluster, uid);
}

void QuotaStage::set_namespace(const std::string& ns, model::Labels labels) {
  namespaces_[ns] = std::move(labels);
}

std::vector<QuotaRow> QuotaStage::rows(const std::vector<Quota>& quotas,
                                       std::int64_t cluster_gpus) const {
  return quota_rows(quotas, view(cluster_gpus));
}

}  // namespace gapless::placement
