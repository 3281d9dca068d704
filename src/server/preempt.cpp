// Preempt: kube-scheduler proposes victims per node (chosen with in-tree filters only, blind to
// GPUs); Gapless keeps a node only if evicting those victims really frees GPUs this pod can use.
#include <set>

#include "gapless/k8s/pod_request.h"
#include "gapless/server/extender.h"
#include "wire.h"

namespace gapless::server {

using nlohmann::json;

namespace {

// UIDs of one node's victims, from MetaVictims ({"UID":..}) or full Victims (pod objects).
std::vector<std::string> victim_uids(const json& victims) {
  std::vector<std::string> out;
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
      out.push_back(uid->get<std::string>());
    }
  }
  return out;
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
  json kept = json::object();
  if (candidates != nullptr) {
    for (auto it = candidates->begin(); it != candidates->end(); ++it) {
      std::vector<std::string> uids = victim_uids(it.value());
      if (uids.empty()) continue;  // kube-scheduler rejects nodes without victims
      const bool useful = parsed->request.kind == model::RequestKind::kNone ||
                          scheduler_.frees_room(parsed->request, it.key(), uids);
      if (!useful) continue;
      json pods = json::array();
      for (const std::string& uid : uids) pods.push_back(json{{"UID", uid}});
      const json* pdb = wire::field(it.value(), "NumPDBViolations");
      kept[it.key()] = json{{"Pods", std::move(pods)},
                            {"NumPDBViolations", pdb && pdb->is_number_integer() ? *pdb : json(0)}};
    }
  }
  return finish(true, json{{"NodeNameToMetaVictims", std::move(kept)}});
}

}  // namespace gapless::server
