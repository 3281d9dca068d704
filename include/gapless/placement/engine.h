// The placement engine: the three extender verbs as pure functions of the cluster model.
// The server and the bench call exactly these.
//
// Thread-safety: all functions only read the Cluster; callers hold at least a shared lock.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "gapless/model/allocation.h"
#include "gapless/model/cluster.h"
#include "gapless/model/request.h"
#include "gapless/model/result.h"
#include "gapless/placement/fit.h"
#include "gapless/placement/profile.h"
#include "gapless/placement/verdict_cache.h"

namespace gapless::placement {

struct FilterResult {
  // Why nodes were rejected: one entry per distinct reason of this call, so a reason's text is
  // built once however many nodes share it.
  struct Reason {
    std::string text;           // the sentence users read (names no node)
    std::string_view label;     // metric label
    bool unresolvable = false;  // never fits (vs full now)
  };
  struct Rejection {
    std::string node;
    std::size_t reason = 0;  // index into reasons
  };

  std::vector<std::string> passed;  // in input order
  std::vector<Rejection> rejected;  // in input order
  std::vector<Reason> reasons;

  // Rejections as maps, node -> reason text (or label); for callers that look nodes up by name.
  std::unordered_map<std::string, std::string> failed() const;        // full now
  std::unordered_map<std::string, std::string> unresolvable() const;  // never fits
  std::unordered_map<std::string, std::string> labels() const;
};

// Every input name ends up in exactly one of passed / failed / unresolvable (a name twice in
// the input is reported once). Unknown nodes are unresolvable. A kNone request passes all.
// With a cache, verdicts of nodes unchanged since this shape was last asked about are reused;
// the answer is the same either way.
// `check_host` false: CPU and memory are not checked (kube-scheduler's NodeResourcesFit did).
// `passed_nodes`, when given, receives the node of each passed name (aligned with passed; null
// for an unknown name a kNone request passes), for a caller that scores them under the same lock.
FilterResult filter(const model::Cluster& cluster, const model::GpuRequest& req,
                    const std::vector<std::string>& nodes, VerdictCache* cache = nullptr,
                    bool check_host = true,
                    std::vector<const model::Node*>* passed_nodes = nullptr);

// Node score in [0, 1] for a node the request fits, or -1 when it does not fit.
double score_node(const model::Node& node, const model::GpuRequest& req, const Profile& profile);

// score_node for a node that passed filter, as the trace bench ranks nodes: the GPU pick is
// skipped when the profile gives it no weight (gpu weight 0, no topology term), since it cannot
// change the score, and a request without GPUs (the trace's CPU-only pods, which carry host
// resources) is ranked by the node-level strategies instead of scored 0.
// REQUIRES: quick_fit(node, req) fits.
double score_fitting_node(const model::Node& node, const model::GpuRequest& req,
                          const Profile& profile);

// The terms weighted_score combines into a node's engine score, for explaining it. Each term is a
// score in [0, 1] and the weight it carries; the engine score is sum(weight * score) / sum(weight).
struct ScoreTerm {
  std::string name;  // a strategy's name, or "gpu", "connectivity", "island_kept"
  double weight = 0;
  double score = 0;
};
struct ScoreBreakdown {
  std::vector<ScoreTerm> node;            // the node-level strategies, in profile order
  std::optional<ScoreTerm> gpu;           // the GPU-level score of the pick, when it counts
  std::optional<ScoreTerm> connectivity;  // multi-GPU requests with a topology wish only
  std::optional<ScoreTerm> island_kept;   // with connectivity
  double total = -1;                      // the engine score, as score_fitting_node returns it
};

// score_fitting_node with the terms it was computed from: the same code path, so total equals
// score_fitting_node(node, req, profile). REQUIRES: quick_fit(node, req) fits.
ScoreBreakdown explain_fitting_node(const model::Node& node, const model::GpuRequest& req,
                                    const Profile& profile);

// The Score stage: the engine's score in [0, 1] per input name (score_fitting_node) where the
// request fits the node now, -1 where it does not or the node is unknown. The cache, as for
// filter, is used when scores_are_cacheable(profile). `check_host` as for filter.
std::vector<double> score_nodes(const model::Cluster& cluster, const model::GpuRequest& req,
                                const Profile& profile, const std::vector<std::string>& nodes,
                                VerdictCache* cache = nullptr, bool check_host = true);

// score_nodes for nodes that just passed filter, under the same lock: no name lookups and no
// second fit check (a null node scores -1). Same cache entries as score_nodes.
// REQUIRES: the request fits each non-null node now (filter said so and nothing changed since).
std::vector<double> score_passed_nodes(const std::vector<const model::Node*>& nodes,
                                       const model::GpuRequest& req, const Profile& profile,
                                       std::size_t slot_count, VerdictCache* cache = nullptr);

// Fills `cache` with what filter and score_nodes would compute for `req` under `profile` on these
// nodes now (unknown names are skipped), computing only the entries it lacks: the next pod of
// this shape then finds them. Scores only when scores_are_cacheable(profile). Changes no answer:
// an entry is what the stage computes for the node at its current generation. Returns how many
// scores it computed. `check_host` as for filter.
std::size_t warm_nodes(const model::Cluster& cluster, const model::GpuRequest& req,
                       const Profile& profile, std::span<const std::string> nodes,
                       VerdictCache& cache, bool check_host);

// kube-scheduler's extender score range is 0..10 (MaxExtenderPriority).
inline constexpr int kMaxNodeScore = 10;

// A node's place among equal engine scores: lower wins. A hash of the name (FNV-1a), so the
// order is fixed, the same in every process, and unrelated to names' alphabetical order.
std::uint64_t tie_break_rank(std::string_view node);

// The NormalizeScore stage: engine scores -> 0..10 such that the engine's best node (the highest
// score, ties to the lowest rank) is the only one with 10. kube-scheduler adds score x weight x 10
// to its own plugins' scores and picks at random among equal totals; with one node alone at the
// top and the shipped weight, that random pick never overrules the engine. Nodes as good as the
// best but behind it on rank get 9; strictly worse nodes 0..8, linear between the lowest score
// and the best; nodes that do not fit (raw < 0) 0. REQUIRES: rank.size() == raw.size().
std::vector<int> normalize_scores(const std::vector<double>& raw,
                                  const std::vector<std::uint64_t>& rank);

// score_nodes then normalize_scores with tie_break_rank: one 0..10 score per input name.
std::vector<int> prioritize(const model::Cluster& cluster, const model::GpuRequest& req,
                            const Profile& profile, const std::vector<std::string>& nodes,
                            VerdictCache* cache = nullptr);

// The allocation the pod would get on `node` now, or why it cannot.
Result<model::Allocation> place(const model::Cluster& cluster, const model::GpuRequest& req,
                                const Profile& profile, const model::PodInfo& pod,
                                const std::string& node);

}  // namespace gapless::placement
