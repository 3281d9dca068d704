#include "report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

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
  if (std::isnan(x)) return "null";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, x);
  return buf;
}

std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
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
  o << "{\"trace\":" << quoted(cell.trace) << ",\"policy\":" << quoted(cell.policy)
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

std::string markdown_table(const std::vector<Cell>& cells, const PublishedTable& published) {
  std::vector<std::string> traces, policies;
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
       "parentheses.\n\n| trace |";
  for (const std::string& p : policies) o << " " << policy_column(p) << " |";
  o << "\n|---|";
  for (std::size_t i = 0; i < policies.size(); ++i) o << "---|";
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

}  // namespace gapless::bench
