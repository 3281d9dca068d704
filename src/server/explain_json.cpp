#include "explain_json.h"

namespace gapless::server {

using nlohmann::json;

namespace {

const char* verdict_name(placement::NodeExplanation::Verdict v) {
  switch (v) {
    case placement::NodeExplanation::Verdict::kPassed:
      return "passed";
    case placement::NodeExplanation::Verdict::kFailed:
      return "failed";
    case placement::NodeExplanation::Verdict::kUnresolvable:
      return "unresolvable";
  }
  return "unknown";
}

json term_json(const placement::ScoreTerm& t) {
  return {{"Name", t.name}, {"Weight", t.weight}, {"Score", t.score}};
}

json optional_term(const std::optional<placement::ScoreTerm>& t) {
  return t ? term_json(*t) : json(nullptr);
}

json components_json(const placement::ScoreBreakdown& b) {
  json node = json::array();
  for (const placement::ScoreTerm& t : b.node) node.push_back(term_json(t));
  return {{"Node", std::move(node)},
          {"Gpu", optional_term(b.gpu)},
          {"Connectivity", optional_term(b.connectivity)},
          {"IslandKept", optional_term(b.island_kept)}};
}

json placement_json(const model::Allocation& a) {
  json gpus = json::array();
  for (const model::GpuGrant& g : a.gpus) {
    json one = {{"Index", g.index}, {"Uuid", g.uuid}, {"Whole", g.whole()}};
    if (g.memory_mib != 0 || g.compute_milli != 0) {
      one["MemoryMiB"] = g.memory_mib;
      one["ComputeMilli"] = g.compute_milli;
    }
    if (g.gpushare_units != 0) one["GpushareUnits"] = g.gpushare_units;
    gpus.push_back(std::move(one));
  }
  json mig = json::array();
  for (const model::MigGrant& m : a.mig) {
    mig.push_back({{"Gpu", m.gpu}, {"Profile", m.profile}, {"Start", m.start}});
  }
  return {{"Gpus", std::move(gpus)}, {"Mig", std::move(mig)}};
}

json node_json(const placement::NodeExplanation& e) {
  json out = {{"Node", e.node}, {"Verdict", verdict_name(e.verdict)}, {"Reason", e.reason}};
  if (e.verdict != placement::NodeExplanation::Verdict::kPassed) {
    out.update({{"RawScore", nullptr},
                {"Score", nullptr},
                {"Components", nullptr},
                {"Placement", nullptr}});
    return out;
  }
  out["RawScore"] = e.score.total;
  out["Score"] = e.normalized;
  out["Components"] = components_json(e.score);
  out["Placement"] = e.placement ? placement_json(*e.placement) : json(nullptr);
  if (!e.placement_error.empty()) out["PlacementError"] = e.placement_error;
  return out;
}

json consolidation_json(const placement::ConsolidationRules& rules,
                        const placement::ConsolidationSearch& s) {
  json plan = nullptr;
  if (s.plan) {
    json moves = json::array();
    for (const placement::PlannedMove& m : s.plan->moves) {
      moves.push_back({{"Pod", m.pod_ns + "/" + m.pod_name},
                       {"Uid", m.pod_uid},
                       {"From", m.from},
                       {"To", m.to},
                       {"GpuMilli", m.gpu_milli},
                       {"GpuSecondsLost", m.gpu_seconds}});
    }
    plan = {{"Node", s.plan->node},
            {"Moves", std::move(moves)},
            {"GpuMilli", s.plan->gpu_milli},
            {"GpuSecondsLost", s.plan->gpu_seconds}};
  }
  return {{"DryRun", rules.dry_run},
          {"Plan", std::move(plan)},
          {"Why", placement::describe(s, rules)},
          {"NodesConsidered", s.nodes_considered},
          {"SetsFitting", s.sets_fitting},
          {"SetsUnplaceable", s.sets_unplaceable},
          {"SetsRateLimited", s.sets_rate_limited},
          {"Exhaustive", s.exhaustive}};
}

}  // namespace

json explanation_json(const std::string& pod, const std::string& profile,
                      const std::vector<placement::NodeExplanation>& nodes,
                      const placement::ConsolidationRules& rules,
                      const placement::ConsolidationSearch* search) {
  json list = json::array();
  for (const placement::NodeExplanation& e : nodes) list.push_back(node_json(e));
  json out = {{"Pod", pod}, {"Profile", profile}, {"Nodes", std::move(list)}, {"Error", ""}};
  if (rules.enabled && search != nullptr) out["Consolidation"] = consolidation_json(rules, *search);
  return out;
}

json explanation_error(const std::string& message) {
  return {{"Pod", nullptr}, {"Profile", nullptr}, {"Nodes", nullptr}, {"Error", message}};
}

}  // namespace gapless::server
