// GET /ui/map.json and /ui/explain/<uid>: the GPU map page's views of the model
// (docs/gpu-map.md). The map is built in one pass over nodes and allocations, with pods named
// once in a table that GPUs point into by index: at 5,000 nodes of 8 GPUs the answer stays near
// a megabyte and a poll costs milliseconds.
#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "explain_json.h"
#include "gapless/server/extender.h"
#include "node_json.h"
#include "wire.h"

namespace gapless::server {

using nlohmann::json;

namespace {

// Waiting pods shown at most; the page says when there are more.
constexpr std::size_t kMaxPendingShown = 500;

// The pods holding something, numbered in the order first met.
class PodTable {
 public:
  int index_of(const model::Allocation& a) {
    auto [it, added] = by_uid_.try_emplace(a.pod_uid, static_cast<int>(rows_.size()));
    if (added) rows_.push_back({{"name", a.pod_ns + "/" + a.pod_name}, {"uid", a.pod_uid}});
    return it->second;
  }
  bool holds(const std::string& uid) const { return by_uid_.count(uid) != 0; }
  json take() { return std::move(rows_); }

 private:
  std::unordered_map<std::string, int> by_uid_;
  json rows_ = json::array();
};

// What each pod holds on one node, by GPU: the whole holder, the shares, the MIG instances.
struct GpuHolders {
  int whole = -1;
  json shares = json::array();
  std::vector<std::pair<int, const model::MigGrant*>> mig;  // pod index, grant
  json overuse = json::array();  // the agent's marks: shares over their vRAM
};

int mig_width(const model::Gpu& g, const std::string& profile) {
  const model::MigProfile* p = model::find_mig_profile(g.mig_family, profile);
  return p != nullptr ? p->memory_slices : 1;
}

json mig_json(const model::Gpu& g, const GpuHolders& h) {
  json out = json::array();
  auto holder_at = [&h](int start, const std::string& profile) {
    for (const auto& [pod, grant] : h.mig) {
      if (grant->start == start && grant->profile == profile) return json(pod);
    }
    return json(nullptr);
  };
  if (!g.mig.instances.empty()) {  // a static layout: every instance, held or not
    for (const model::MigInstance& in : g.mig.instances) {
      out.push_back({{"profile", in.profile},
                     {"start", in.start},
                     {"width", mig_width(g, in.profile)},
                     {"pod", holder_at(in.start, in.profile)}});
    }
    return out;
  }
  for (const auto& [pod, grant] : h.mig) {  // reconfigurable: the instances pods hold
    out.push_back({{"profile", grant->profile},
                   {"start", grant->start},
                   {"width", mig_width(g, grant->profile)},
                   {"pod", pod}});
  }
  return out;
}

// One GPU: memory and model (when unlike the node's first GPU), health, holders. Keys are
// present only when they say something, to keep 40,000 GPUs small.
json gpu_json(const model::Gpu& g, const std::string& node_model, const GpuHolders& h) {
  json out = {{"mem", g.memory_mib}};
  if (g.model != node_model) out["model"] = g.model;
  if (!g.healthy) out["unhealthy"] = true;
  if (h.whole >= 0) out["whole"] = h.whole;
  if (!h.shares.empty()) {
    out["shares"] = h.shares;
    out["usedMem"] = g.used.memory_used_mib;
    out["usedMilli"] = g.used.compute_used_milli;
  }
  if (g.gpushare_capacity > 0) {
    out["gpushare"] = {{"capacity", g.gpushare_capacity}, {"used", g.used.gpushare_used}};
  }
  if (g.mig.enabled) out["mig"] = mig_json(g, h);
  if (!h.overuse.empty()) out["overuse"] = h.overuse;
  return out;
}

const char* kind_name(model::RequestKind k) {
  switch (k) {
    case model::RequestKind::kNone:
      return "none";
    case model::RequestKind::kWhole:
      return "whole";
    case model::RequestKind::kShared:
      return "share";
    case model::RequestKind::kMig:
      return "mig";
    case model::RequestKind::kGpushare:
      return "gpushare";
  }
  return "unknown";
}

// What a waiting pod asks for, in words ("8 GPUs", "20480 MiB + 300m on 1 GPU", "2 x 3g.40gb").
std::string ask_text(const model::GpuRequest& r) {
  switch (r.kind) {
    case model::RequestKind::kWhole:
      return std::to_string(r.whole) + " GPU" + (r.whole == 1 ? "" : "s");
    case model::RequestKind::kShared:
      return std::to_string(r.shared.memory_mib) + " MiB + " +
             std::to_string(r.shared.compute_milli) + "m on " + std::to_string(r.shared.count) +
             " GPU" + (r.shared.count == 1 ? "" : "s");
    case model::RequestKind::kMig:
      return std::to_string(r.mig_count) + " x " + r.mig_profile;
    case model::RequestKind::kGpushare:
      return std::to_string(r.gpushare_units) + " gpu-mem units";
    case model::RequestKind::kNone:
      break;
  }
  return "no GPU";
}

// The agent's mark on a pod ([{"gpu", "usedMiB", "limitMiB"}], usage_report.h) on its GPUs;
// a mark that is not that shape is ignored.
template <typename HolderOf>
void mark_overuse(const model::Allocation& a, const std::string& mark, HolderOf holder) {
  if (mark.empty()) return;
  const json list = json::parse(mark, nullptr, false);
  if (!list.is_array()) return;
  for (const json& m : list) {
    if (!m.is_object() || !m.value("gpu", json()).is_number_integer()) continue;
    if (GpuHolders* h = holder(m["gpu"].get<int>())) {
      h->overuse.push_back({{"pod", a.pod_ns + "/" + a.pod_name},
                            {"usedMiB", m.value("usedMiB", json())},
                            {"limitMiB", m.value("limitMiB", json())}});
    }
  }
}

struct Counts {
  int gpus = 0, allocated = 0, idle = 0, unhealthy = 0, nodes = 0, fenced_nodes = 0;
};

void count_node(const model::Node& n, Counts* c) {
  ++c->nodes;
  if (n.fenced()) ++c->fenced_nodes;
  for (const model::Gpu& g : n.gpus) {
    ++c->gpus;
    if (!g.healthy) {
      ++c->unhealthy;
    } else if (!g.used.idle()) {
      ++c->allocated;
    } else if (!n.fenced()) {
      ++c->idle;
    }
  }
}

}  // namespace

std::string Extender::gpu_map() const {
  PodTable pods;
  json nodes = json::array();
  Counts counts;
  scheduler_.read([&](const model::Cluster& cluster) {
    std::unordered_map<std::string, std::vector<const model::Allocation*>> by_node;
    for (const model::Allocation* a : cluster.allocations()) {
      if (!a->gpus.empty() || !a->mig.empty()) by_node[a->node].push_back(a);
    }
    for (const model::Node* n : cluster.nodes()) {
      count_node(*n, &counts);
      std::vector<GpuHolders> holders(n->gpus.size());
      auto holder = [&holders](int gpu) {
        return gpu >= 0 && gpu < static_cast<int>(holders.size()) ? &holders[gpu] : nullptr;
      };
      for (const model::Allocation* a : by_node[n->name]) {
        const int pod = pods.index_of(*a);
        for (const model::GpuGrant& g : a->gpus) {
          GpuHolders* h = holder(g.index);
          if (h == nullptr) continue;
          if (g.whole()) {
            h->whole = pod;
          } else {
            h->shares.push_back({pod, g.memory_mib, g.compute_milli, g.gpushare_units});
          }
        }
        for (const model::MigGrant& m : a->mig) {
          if (GpuHolders* h = holder(m.gpu)) h->mig.emplace_back(pod, &m);
        }
        if (!overuse_.empty()) mark_overuse(*a, overuse_.find(a->pod_uid), holder);
      }
      const std::string model = n->gpus.empty() ? "" : n->gpus.front().model;
      json gpus = json::array();
      for (std::size_t i = 0; i < n->gpus.size(); ++i) {
        gpus.push_back(gpu_json(n->gpus[i], model, holders[i]));
      }
      json node = {{"name", n->name}, {"model", model}, {"gpus", std::move(gpus)}};
      if (n->fenced()) node["fenced"] = n->fence_reason;
      if (json islands = nvlink_islands(*n); !islands.empty()) node["islands"] = std::move(islands);
      if (!n->mig_pool.empty()) {
        json pool = json::object();
        for (const auto& [profile, p] : n->mig_pool) {
          pool[profile] = {{"total", p.total}, {"used", p.used}};
        }
        node["migPool"] = std::move(pool);
      }
      nodes.push_back(std::move(node));
    }
  });

  // Stranded: idle GPU the learned mix could not use after packing (the engine's measure, as
  // gapless_cluster_stranded_gpus exports it), never more than the idle GPUs counted here.
  const placement::ClusterSummary summary = scheduler_.summary();
  double stranded_milli = 0;
  for (const auto& [model, m] : summary.models) stranded_milli += m.stranded_milli;
  const int stranded = std::min(counts.idle, static_cast<int>(std::lround(stranded_milli / 1000)));

  const std::optional<placement::DrainReservation> drain = scheduler_.drain();
  json pending = json::array();
  const auto listed = pending_.list(kMaxPendingShown);
  for (const PendingPods::Listed& p : listed) {
    if (pods.holds(p.pod.info.uid)) continue;  // bound since
    const bool holds_drain = drain && drain->pod_uid == p.pod.info.uid;
    pending.push_back({{"pod", p.pod.info.ns + "/" + p.pod.info.name},
                       {"uid", p.pod.info.uid},
                       {"kind", kind_name(p.pod.request.kind)},
                       {"ask", ask_text(p.pod.request)},
                       {"seenSecondsAgo", std::lround(p.seen_seconds_ago)},
                       {"drain", holds_drain}});
  }
  json drain_out = nullptr;
  if (drain) drain_out = {{"uid", drain->pod_uid}, {"node", drain->node}};
  json holds = json::array();  // rooms consolidation keeps for a waiting pod
  for (const placement::RoomHold& h : scheduler_.holds()) {
    holds.push_back({{"uid", h.room.pod_uid}, {"node", h.room.node}});
  }
  return wire::dump(
      json{{"version", 1},
           {"cluster",
            {{"nodes", counts.nodes},
             {"fencedNodes", counts.fenced_nodes},
             {"gpus", counts.gpus},
             {"allocated", counts.allocated},
             {"stranded", stranded},
             {"free", counts.idle - stranded},
             {"unhealthy", counts.unhealthy},
             {"fencedIdle", counts.gpus - counts.allocated - counts.idle - counts.unhealthy}}},
           {"pods", pods.take()},
           {"nodes", std::move(nodes)},
           {"pending", std::move(pending)},
           {"pendingMore", listed.size() >= kMaxPendingShown},
           {"waiting", scheduler_.waiting()},
           {"drain", std::move(drain_out)},
           {"holds", std::move(holds)}});
}

std::string Extender::explain_pending(const std::string& uid) const {
  if (!ready()) return wire::dump(explanation_error(kNotReady));
  const std::optional<k8s::ParsedPod> pod = pending_.find(uid);
  if (!pod) {
    return wire::dump(explanation_error("no pod with UID \"" + uid +
                                        "\" waits: filter has not seen it, or it is bound"));
  }
  std::string policy_error;
  const auto loaded = scheduler_.policy();
  const placement::Profile* profile =
      placement::Scheduler::select_profile(*loaded, pod->info, &policy_error);
  if (profile == nullptr) return wire::dump(explanation_error(policy_error));
  std::vector<std::string> names;
  scheduler_.read([&names](const model::Cluster& cluster) {
    for (const model::Node* n : cluster.nodes()) names.push_back(n->name);
  });
  return wire::dump(explanation_json(pod->info.ns + "/" + pod->info.name, profile->name,
                                     scheduler_.explain(pod->info, pod->request, *profile, names)));
}

}  // namespace gapless::server
