// What gapless-bench prints: one JSON object per (trace, policy), a markdown table next to the
// FGD paper's published numbers, and CSV curves over arrived %.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "gapless/model/result.h"
#include "limit.h"
#include "metrics.h"
#include "replay.h"

namespace gapless::bench {

// The published mean and sd of unallocated GPU % at arrived 100 % and 130 % (the authors'
// results, summary_by_trace_policy.csv).
struct Published {
  double mean100 = 0, sd100 = 0, mean130 = 0, sd130 = 0;
};
// Keyed by (trace name as trace_name() gives it, strategy name: random, dotprod, ...).
using PublishedTable = std::map<std::pair<std::string, std::string>, Published>;
Result<PublishedTable> load_published(const std::string& path);

// Every seed's run of one policy on one trace.
struct Cell {
  std::string mode;  // "" (the paper's procedure in-process), "deployed" or "http"
  std::string trace;
  std::string policy;  // label as given on the command line
  std::vector<int> seeds;
  std::vector<Curve> curves;    // per seed
  std::vector<double> seconds;  // per seed
  std::vector<int> failed;      // per seed: pods dropped

  Summary unallocated(int arrived) const;  // 100 - alloc at that bucket, over seeds
  Summary frag_amount(int arrived) const;
  Summary frag_ratio(int arrived) const;
};

// A number with `decimals` decimals, "null" for NaN; a string quoted for JSON.
std::string json_number(double x, int decimals);
std::string json_quoted(const std::string& s);

// Short name of a policy label for tables: a YAML path's file stem, else the label.
std::string policy_column(const std::string& label);

// One line: trace, policy, seeds, unallocated_mean/sd (arrived 100 %), unallocated130_mean/sd,
// frag amount and ratio at 100 %, seconds per run, failed pods, and the published numbers when
// known.
std::string json_line(const Cell& cell, const Published* published);

// Rows: traces; columns: policies. Each cell "ours (published)" at arrived 100 %. With limits,
// two more columns: the LP's lower bound and the offline packing (limit.h).
std::string markdown_table(const std::vector<Cell>& cells, const PublishedTable& published,
                           const std::vector<LimitCell>& limits = {});

// CSV over arrived 0..130: unallocated mean/sd/median, frag amount and ratio means.
std::string curve_csv(const Cell& cell);

// Dynamic mode (replay.h). Each statistic is taken per run, then mean and sd over seeds.
//
// One JSON line: mode "dynamic" (as deployed: mode "deployed", replay "dynamic", and waits, how
// waiting pods reach the extender: "filter" or "filter+unschedulable"), trace, policy, seeds,
// speedup, max_wait_s, pods, horizon_s; pending_mean_s, pending_p50_s, pending_p99_s, pending_max_s
// (pending time = start - arrival over the pods that started), waited_pct (started pods that waited
// at all), the multi-GPU pods' (2 or more whole GPUs) multi_gpu_pending_mean_s,
// multi_gpu_pending_max_s and multi_gpu_waited_pct, never_placed, alloc_pct (time-weighted GPU
// allocation % over [0, last arrival]), alloc_peak_pct, each with a "_sd" twin; seconds_per_run.
std::string dynamic_json_line(const DynamicCell& cell, const DynamicOptions& options);
// One row per (trace, policy): pending mean/p50/p99, waited %, never placed, GPU allocation %,
// the multi-GPU pods' mean and max pending.
std::string dynamic_markdown_table(const std::vector<DynamicCell>& cells,
                                   const DynamicOptions& options);
// CSV over time, [0, curve_span x last arrival]: time_s, time_pct (of the last arrival's time),
// alloc_mean, alloc_sd (GPU allocation %), waiting_mean, waiting_sd (pods waiting).
std::string dynamic_curve_csv(const DynamicCell& cell, const DynamicOptions& options);

}  // namespace gapless::bench
