// Preempt: kube-scheduler proposes victims per node from a dry run blind to which GPUs (and to
// shares and MIG slots); Gapless answers, per offered node, the lower-priority pods whose eviction
// frees GPUs this pod can really use (Scheduler::select_victims), keeping kube-scheduler's
// non-GPU victims, or drops the node where no such set exists.
#include <climits>
#include <set>

#include "gapless/k8s/json_fields.h"
#include "gapless/k8s/pod_request.h"
#include "gapless/server/extender.h"
#include "wire.h"

namespace gapless::server {

using nlohmann::json;

namespace {

// The victim's spec.priority when the request carried the whole pod (NodeNameToVictims).
std::optional<std::int32_t> victim_priority(const json& pod) {
  const json* spec = wire::field(pod, "spec");
  const json* prio = spec != nullptr ? wire::field(*spec, "priority") : nullptr;
  const std::optional<std::int64_t> v = prio != nullptr ? k8s::as_int64(*prio) : std::nullopt;
  if (!v || *v < INT32_MIN || *v > INT32_MAX) return std::nullopt;
  return static_cast<std::int32_t>(*v);
}

// One node's victims, from MetaVictims ({"UID":..}) or full Victims (pod objects).
std::vector<placement::ProposedVictim> proposed_victims(const json& victims) {
  std::vector<placement::ProposedVictim> out;
  std::set<std::string> seen;
  const json* pods = wire::field(victims, "Pods");
  if (pods == nullptr || !pods->is_array()) return out;
  for (const json& p : *pods) {
    const json* uid = wire::field(p, "UID");
    if (uid == nullptr) {
      if (const json* meta = wire::field(p, "metadata")) uid = wire::field(*meta, "uid");
    }
    // Each victim once: evicting a pod twice would free its GPUs twice in the what-if model.
    if (uid != nullptr && uid->is_string() && seen.insert(uid->get<std::string>()).second) {
      out.push_back({uid->get<std::string>(), victim_priority(p)});
    }
  }
  return out;
}

const std::vector<model::DisruptionBudget> kNoBudgets;

std::int64_t pdb_violations(const json& victims) {
  const json* pdb = wire::field(victims, "NumPDBViolations");
  return pdb != nullptr && pdb->is_number_integer() ? k8s::as_int64(*pdb).value_or(0) : 0;
}

json meta_victims(const std::vector<std::string>& uids, std::int64_t pdb) {
  json pods = json::array();
  for (const std::string& uid : uids) pods.push_back(json{{"UID", uid}});
  return json{{"Pods", std::move(pods)}, {"NumPDBViolations", pdb}};
}

// The answer's NodeNameToMetaVictims for kube-scheduler's candidates (an object by node name).
// `budgets`: the PodDisruptionBudgets in force; null when unknown.
json choose(const placement::Scheduler& scheduler, const k8s::ParsedPod& pod,
            const json& candidates, const std::vector<model::DisruptionBudget>* budgets) {
  json kept = json::object();
  std::vector<placement::Scheduler::VictimQuery> queries;
  std::vector<std::int64_t> pdbs;
  for (auto it = candidates.begin(); it != candidates.end(); ++it) {
    queries.push_back({it.key(), proposed_victims(it.value())});
    pdbs.push_back(pdb_violations(it.value()));
  }
  if (pod.request.kind == model::RequestKind::kNone) {
    // No GPUs: kube-scheduler's choice stands, whatever Gapless knows.
    for (std::size_t i = 0; i < queries.size(); ++i) {
      std::vector<std::string> uids;
      for (const auto& v : queries[i].proposed) uids.push_back(v.uid);
      if (!uids.empty()) kept[queries[i].node] = meta_victims(uids, pdbs[i]);
    }
    return kept;
  }
  const auto chosen = scheduler.select_victims(pod.info, pod.request, queries,
                                               budgets != nullptr ? *budgets : kNoBudgets);
  for (std::size_t i = 0; i < queries.size(); ++i) {
    // kube-scheduler refuses a node without victims; one where the pod fits as it is needs no
    // preemption.
    if (!chosen[i] || chosen[i]->victims.empty()) continue;
    // Knowing the budgets, the count is exact. Without, kube-scheduler's holds for its own
    // victims; a pod it did not propose may be protected (it spares those first), so each
    // counts as a violation: such nodes are picked last.
    const std::int64_t violations =
        budgets != nullptr ? chosen[i]->pdb_violations : pdbs[i] + chosen[i]->unproposed;
    kept[queries[i].node] = meta_victims(chosen[i]->victims, violations);
  }
  return kept;
}

}  // namespace

std::string Extender::preempt(std::string_view body) {
  auto start = std::chrono::steady_clock::now();
  auto finish = [&](bool ok, const json& out) {
    const std::chrono::duration<double> d = std::chrono::steady_clock::now() - start;
    metrics_.observe_request("preempt", ok, d.count());
    return wire::dump(out);
  };
  if (!ready()) return finish(false, json{{"Error", kNotReady}});
  auto args = wire::parse_object(body);
  if (!args) return finish(false, json{{"Error", args.error()}});
  const json* pod = wire::field(*args, "Pod");
  if (pod == nullptr) return finish(false, json{{"Error", "request has no Pod"}});
  auto parsed = k8s::parse_pod(*pod);
  if (!parsed) return finish(false, json{{"Error", parsed.error()}});
  // The same profile check as filter: a pod filter refuses must not have victims chosen for it.
  std::string policy_error;
  if (placement::Scheduler::select_profile(*scheduler_.policy(), parsed->info, &policy_error) ==
      nullptr) {
    return finish(false, json{{"Error", policy_error}});
  }

  const json* candidates = wire::field(*args, "NodeNameToMetaVictims");
  if (candidates == nullptr) candidates = wire::field(*args, "NodeNameToVictims");
  if (candidates != nullptr && !candidates->is_object()) {
    return finish(false,
                  json{{"Error", "NodeNameToMetaVictims must be an object keyed by node name"}});
  }
  std::optional<std::vector<model::DisruptionBudget>> budgets;
  if (budgets_) budgets = budgets_();
  json kept = candidates != nullptr
                  ? choose(scheduler_, *parsed, *candidates, budgets ? &*budgets : nullptr)
                  : json::object();
  return finish(true, json{{"NodeNameToMetaVictims", std::move(kept)}});
}

}  // namespace gapless::server
