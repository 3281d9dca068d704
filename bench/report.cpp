#include "report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "limit_report.h"

namespace gapless::bench {
namespace {

const std::map<std::string, std::string> kPublishedPolicies = {
    {"01-Random", "random"},      {"02-DotProd", "dotprod"}, {"03-GpuClustering", "clustering"},
    {"04-GpuPacking", "packing"}, {"05-BestFit", "bestfit"}, {"06-FGD", "fgd"}};

std::vector<std::string> split_csv(const std::string& line) {
  std::vector<std::string> out;
  std::stringstream in(line);
  std::string field;
  while (std::getline(in, field, ',')) out.push_back(field);
  return out;
}

std::string num(double x, int decimals = 2) {
  return json_number(x, decimals);
}
std::string quoted(const std::string& s) {
  return json_quoted(s);
}

Summary over_seeds(const std::vector<Curve>& curves, int arrived,
                   double (*pick)(const Curve&, int)) {
  std::vector<double> v;
  for (const Curve& c : curves) v.push_back(pick(c, arrived));
  return summarize(v);
}

std::string mean_sd(const Summary& s) {
  return s.n == 0 ? "n/a" : num(s.mean) + " ± " + num(s.sd);
}

}  // namespace

std::string json_number(double x, int decimals) {
  if (std::isnan(x)) return "null";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, x);
  return buf;
}

std::string json_quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

Result<PublishedTable> load_published(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Error{path + ": cannot read"};
  std::string line;
  std::getline(in, line);
  const std::vector<std::string> header = split_csv(line);
  std::map<std::string, std::size_t> col;
  for (std::size_t i = 0; i < header.size(); ++i) col[header[i]] = i;
  for (const char* need : {"workload", "sc_policy", "unalloc_pct_mean@100", "unalloc_pct_sd@100",
                           "unalloc_pct_mean@130", "unalloc_pct_sd@130"}) {
    if (!col.count(need)) return Error{path + ":1: header lacks column \"" + need + "\""};
  }
  PublishedTable table;
  int lineno = 1;
  while (std::getline(in, line)) {
    ++lineno;
    if (line.empty()) continue;
    const std::vector<std::string> f = split_csv(line);
    if (f.size() != header.size()) {
      return Error{path + ":" + std::to_string(lineno) + ": expected " +
                   std::to_string(header.size()) + " fields"};
    }
    auto policy = kPublishedPolicies.find(f[col["sc_policy"]]);
    if (policy == kPublishedPolicies.end()) continue;
    std::string trace = f[col["workload"]];
    if (trace.starts_with("openb_pod_list_")) trace = trace.substr(15);
    Published p;
    try {
      p.mean100 = std::stod(f[col["unalloc_pct_mean@100"]]);
      p.sd100 = std::stod(f[col["unalloc_pct_sd@100"]]);
      p.mean130 = std::stod(f[col["unalloc_pct_mean@130"]]);
      p.sd130 = std::stod(f[col["unalloc_pct_sd@130"]]);
    } catch (const std::exception&) {
      return Error{path + ":" + std::to_string(lineno) + ": not a number"};
    }
    table[{trace, policy->second}] = p;
  }
  return table;
}

Summary Cell::unallocated(int arrived) const {
  return over_seeds(curves, arrived, [](const Curve& c, int a) { return 100.0 - c.alloc[a]; });
}
Summary Cell::frag_amount(int arrived) const {
  return over_seeds(curves, arrived, [](const Curve& c, int a) { return c.frag_amount[a]; });
}
Summary Cell::frag_ratio(int arrived) const {
  return over_seeds(curves, arrived, [](const Curve& c, int a) { return c.frag_ratio[a]; });
}

std::string policy_column(const std::string& label) {
  if (label.ends_with(".yaml") || label.ends_with(".yml")) {
    return std::filesystem::path(label).stem().string() + ".yaml";
  }
  return label;
}

std::string json_line(const Cell& cell, const Published* published) {
  const Summary u100 = cell.unallocated(100), u130 = cell.unallocated(130);
  std::ostringstream o;
  o << "{";
  if (!cell.mode.empty()) o << "\"mode\":" << quoted(cell.mode) << ",";
  o << "\"trace\":" << quoted(cell.trace) << ",\"policy\":" << quoted(cell.policy)
    << ",\"seeds\":[";
  for (std::size_t i = 0; i < cell.seeds.size(); ++i) o << (i ? "," : "") << cell.seeds[i];
  o << "],\"unallocated_mean\":" << num(u100.mean, 3) << ",\"unallocated_sd\":" << num(u100.sd, 3)
    << ",\"unallocated130_mean\":" << num(u130.mean, 3)
    << ",\"unallocated130_sd\":" << num(u130.sd, 3)
    << ",\"frag_amount_mean\":" << num(cell.frag_amount(100).mean, 3)
    << ",\"frag_ratio_mean\":" << num(cell.frag_ratio(100).mean, 3);
  std::vector<double> failed(cell.failed.begin(), cell.failed.end());
  o << ",\"failed_pods_mean\":" << num(summarize(failed).mean, 1)
    << ",\"seconds_per_run\":" << num(summarize(cell.seconds).mean, 3);
  if (published != nullptr) {
    o << ",\"published_mean\":" << num(published->mean100)
      << ",\"published_sd\":" << num(published->sd100)
      << ",\"published130_mean\":" << num(published->mean130)
      << ",\"published130_sd\":" << num(published->sd130);
  }
  o << "}";
  return o.str();
}

std::string markdown_table(const std::vector<Cell>& cells, const PublishedTable& published,
                           const std::vector<LimitCell>& limits) {
  std::vector<std::string> traces, policies;
  std::map<std::string, const LimitCell*> limit_of;
  for (const LimitCell& l : limits) limit_of[l.trace] = &l;
  for (const LimitCell& l : limits)
    if (std::find(traces.begin(), traces.end(), l.trace) == traces.end()) traces.push_back(l.trace);
  std::map<std::pair<std::string, std::string>, const Cell*> by;
  for (const Cell& c : cells) {
    if (std::find(traces.begin(), traces.end(), c.trace) == traces.end()) traces.push_back(c.trace);
    if (std::find(policies.begin(), policies.end(), c.policy) == policies.end()) {
      policies.push_back(c.policy);
    }
    by[{c.trace, c.policy}] = &c;
  }
  std::ostringstream o;
  o << "Unallocated GPU % at arrived = 100 %, mean ± sd over seeds; published (FGD paper) in "
       "parentheses.";
  if (!limits.empty()) o << " lp bound: no placement leaves less; offline: a packing that does.";
  o << "\n\n| trace |";
  for (const std::string& p : policies) o << " " << policy_column(p) << " |";
  if (!limits.empty()) o << " lp bound | offline |";
  o << "\n|---|";
  for (std::size_t i = 0; i < policies.size() + (limits.empty() ? 0 : 2); ++i) o << "---|";
  o << "\n";
  for (const std::string& t : traces) {
    o << "| " << t << " |";
    for (const std::string& p : policies) {
      auto it = by.find({t, p});
      o << " " << (it == by.end() ? "" : mean_sd(it->second->unallocated(100)));
      if (auto pub = published.find({t, p}); pub != published.end()) {
        o << " (" << num(pub->second.mean100) << " ± " << num(pub->second.sd100) << ")";
      }
      o << " |";
    }
    if (!limits.empty()) {
      auto l = limit_of.find(t);
      o << " " << (l == limit_of.end() ? "" : mean_sd(bound_summary(*l->second))) << " | "
        << (l == limit_of.end() ? "" : mean_sd(offline_summary(*l->second))) << " |";
    }
    o << "\n";
  }
  return o.str();
}

std::string curve_csv(const Cell& cell) {
  auto field = [](double x) { return std::isnan(x) ? std::string() : num(x, 3); };
  std::ostringstream o;
  o << "arrived_pct,unallocated_mean,unallocated_sd,unallocated_median,frag_amount_mean,"
       "frag_ratio_mean\n";
  for (int a = 0; a < kBuckets; ++a) {
    const Summary u = cell.unallocated(a);
    o << a << "," << field(u.mean) << "," << field(u.sd) << "," << field(u.median) << ","
      << field(cell.frag_amount(a).mean) << "," << field(cell.frag_ratio(a).mean) << "\n";
  }
  return o.str();
}

namespace {

Summary over_runs(const DynamicCell& cell, double DynamicRun::*field) {
  std::vector<double> v;
  for (const DynamicRun& r : cell.runs) v.push_back(r.*field);
  return summarize(v);
}

Summary over_runs(const DynamicCell& cell, int DynamicRun::*field) {
  std::vector<double> v;
  for (const DynamicRun& r : cell.runs) v.push_back(r.*field);
  return summarize(v);
}

std::string mean_sd(const Summary& s, int decimals) {
  return s.n == 0 ? "n/a" : num(s.mean, decimals) + " ± " + num(s.sd, decimals);
}

}  // namespace

std::string dynamic_json_line(const DynamicCell& cell, const DynamicOptions& options) {
  std::ostringstream o;
  // As deployed the line says so as the static replay's do, with the replay and the waits.
  if (cell.deployed_waits.empty()) {
    o << "{\"mode\":\"dynamic\"";
  } else {
    o << "{\"mode\":\"deployed\",\"replay\":\"dynamic\",\"waits\":" << quoted(cell.deployed_waits);
  }
  o << ",\"trace\":" << quoted(cell.trace) << ",\"policy\":" << quoted(cell.policy)
    << ",\"seeds\":[";
  for (std::size_t i = 0; i < cell.seeds.size(); ++i) o << (i ? "," : "") << cell.seeds[i];
  o << "],\"speedup\":" << num(options.speedup, 3) << ",\"max_wait_s\":" << num(options.max_wait, 1)
    << ",\"pods\":" << (cell.runs.empty() ? 0 : cell.runs[0].arrived)
    << ",\"horizon_s\":" << num(over_runs(cell, &DynamicRun::horizon).mean, 1);
  auto both = [&](const char* name, const Summary& s, int decimals) {
    o << ",\"" << name << "\":" << num(s.mean, decimals) << ",\"" << name
      << "_sd\":" << num(s.sd, decimals);
  };
  both("pending_mean_s", over_runs(cell, &DynamicRun::pending_mean), 3);
  both("pending_p50_s", over_runs(cell, &DynamicRun::pending_p50), 3);
  both("pending_p99_s", over_runs(cell, &DynamicRun::pending_p99), 3);
  both("pending_max_s", over_runs(cell, &DynamicRun::pending_max), 3);
  both("waited_pct", over_runs(cell, &DynamicRun::waited_pct), 3);
  both("never_placed", over_runs(cell, &DynamicRun::never_placed), 1);
  both("alloc_pct", over_runs(cell, &DynamicRun::alloc_mean), 3);
  both("alloc_peak_pct", over_runs(cell, &DynamicRun::alloc_peak), 3);
  both("multi_gpu_pending_mean_s", over_runs(cell, &DynamicRun::multi_gpu_pending_mean), 3);
  both("multi_gpu_pending_p99_s", over_runs(cell, &DynamicRun::multi_gpu_pending_p99), 3);
  both("multi_gpu_pending_max_s", over_runs(cell, &DynamicRun::multi_gpu_pending_max), 3);
  both("multi_gpu_waited_pct", over_runs(cell, &DynamicRun::multi_gpu_waited_pct), 3);
  both("multi_gpu_longest_bound_s", over_runs(cell, &DynamicRun::multi_gpu_longest_bound), 3);
  both("contended_s", over_runs(cell, &DynamicRun::contended_s), 1);
  both("alloc_contended_pct", over_runs(cell, &DynamicRun::alloc_contended), 3);
  if (options.movable > 0) {
    o << ",\"movable\":" << num(options.movable, 3);
    both("plans_applied", over_runs(cell, &DynamicRun::plans_applied), 1);
    both("moves", over_runs(cell, &DynamicRun::moves), 1);
    both("moves_per_1000", over_runs(cell, &DynamicRun::moves_per_1000), 3);
    both("gpu_seconds_lost", over_runs(cell, &DynamicRun::gpu_seconds_lost), 1);
    both("moved_unplaced", over_runs(cell, &DynamicRun::moved_unplaced), 1);
  }
  o << ",\"seconds_per_run\":" << num(over_runs(cell, &DynamicRun::seconds).mean, 3) << "}";
  return o.str();
}

namespace {

// The consolidation columns (--movable): what the moves bought and cost.
std::string consolidation_table(const std::vector<DynamicCell>& cells,
                                const DynamicOptions& options) {
  std::ostringstream o;
  o << "\nConsolidation, " << num(100 * options.movable, 0)
    << " % of pods movable: multi-GPU pods' waits, the moves made and what they cost (GPU-time "
       "lost: the run time of every moved pod, which restarts from scratch). Unallocated % "
       "while pods wait = 100 - alloc % while pods wait.\n\n"
       "| trace | policy | multi-GPU mean (s) | p99 (s) | max (s) | moves / 1,000 pods | "
       "GPU-hours lost | unallocated % while pods wait |\n"
       "|---|---|---|---|---|---|---|---|\n";
  for (const DynamicCell& c : cells) {
    std::vector<double> hours, unallocated;
    for (const DynamicRun& r : c.runs) {
      hours.push_back(r.gpu_seconds_lost / 3600);
      if (!std::isnan(r.alloc_contended)) unallocated.push_back(100 - r.alloc_contended);
    }
    o << "| " << c.trace << " | " << policy_column(c.policy) << " | "
      << mean_sd(over_runs(c, &DynamicRun::multi_gpu_pending_mean), 1) << " | "
      << mean_sd(over_runs(c, &DynamicRun::multi_gpu_pending_p99), 1) << " | "
      << mean_sd(over_runs(c, &DynamicRun::multi_gpu_pending_max), 0) << " | "
      << mean_sd(over_runs(c, &DynamicRun::moves_per_1000), 2) << " | "
      << mean_sd(summarize(hours), 2) << " | " << mean_sd(summarize(unallocated), 2) << " |\n";
  }
  return o.str();
}

}  // namespace

std::string dynamic_markdown_table(const std::vector<DynamicCell>& cells,
                                   const DynamicOptions& options) {
  std::ostringstream o;
  o << "Dynamic replay, speedup " << num(options.speedup, options.speedup < 10 ? 2 : 0);
  if (!cells.empty() && !cells.front().deployed_waits.empty()) {
    o << ", as deployed (waiting pods reach the extender by: " << cells.front().deployed_waits
      << ")";
  }
  if (options.max_wait > 0) o << ", max wait " << num(options.max_wait, 0) << " s";
  o << "; mean ± sd over seeds. Pending time = start - arrival (s) over the pods that started; "
       "GPU allocation % time-weighted over [0, last arrival].\n\n"
       "| trace | policy | pending mean (s) | p50 (s) | p99 (s) | max (s) | waited % | "
       "never placed | GPU alloc % | peak alloc % | alloc % while pods wait | "
       "multi-GPU pods: mean / max (s) |\n"
       "|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const DynamicCell& c : cells) {
    o << "| " << c.trace << " | " << policy_column(c.policy) << " | "
      << mean_sd(over_runs(c, &DynamicRun::pending_mean), 1) << " | "
      << mean_sd(over_runs(c, &DynamicRun::pending_p50), 1) << " | "
      << mean_sd(over_runs(c, &DynamicRun::pending_p99), 1) << " | "
      << mean_sd(over_runs(c, &DynamicRun::pending_max), 0) << " | "
      << mean_sd(over_runs(c, &DynamicRun::waited_pct), 2) << " | "
      << mean_sd(over_runs(c, &DynamicRun::never_placed), 1) << " | "
      << mean_sd(over_runs(c, &DynamicRun::alloc_mean), 2) << " | "
      << mean_sd(over_runs(c, &DynamicRun::alloc_peak), 2) << " | "
      << mean_sd(over_runs(c, &DynamicRun::alloc_contended), 2) << " | "
      << mean_sd(over_runs(c, &DynamicRun::multi_gpu_pending_mean), 1) << " / "
      << mean_sd(over_runs(c, &DynamicRun::multi_gpu_pending_max), 0) << " |\n";
  }
  if (options.movable > 0) o << consolidation_table(cells, options);
  return o.str();
}

std::string dynamic_curve_csv(const DynamicCell& cell, const DynamicOptions& options) {
  std::ostringstream o;
  o << "time_s,time_pct,alloc_mean,alloc_sd,waiting_mean,waiting_sd\n";
  if (cell.runs.empty()) return o.str();
  const std::size_t points = cell.runs[0].alloc_curve.size();
  const double span = options.curve_span * cell.runs[0].horizon;
  for (std::size_t i = 0; i < points; ++i) {
    std::vector<double> alloc, waiting;
    for (const DynamicRun& r : cell.runs) {
      if (i >= r.alloc_curve.size()) continue;
      alloc.push_back(r.alloc_curve[i]);
      waiting.push_back(r.waiting_curve[i]);
    }
    const double frac = points > 1 ? static_cast<double>(i) / static_cast<double>(points - 1) : 0;
    const Summary a = summarize(alloc), q = summarize(waiting);
    o << num(span * frac, 1) << "," << num(100.0 * options.curve_span * frac, 2) << ","
      << num(a.mean, 3) << "," << num(a.sd, 3) << "," << num(q.mean, 2) << "," << num(q.sd, 2)
      << "\n";
  }
  return o.str();
}

}  // namespace gapless::bench
