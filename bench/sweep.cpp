#include "sweep.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <mutex>
#include <thread>

#include "jobs.h"
#include "trace.h"

namespace gapless::bench {

std::string load_inputs(const std::string& nodes_path, const std::vector<std::string>& pod_paths,
                        SweepInput* in) {
  auto nodes = load_nodes(nodes_path);
  if (!nodes) return nodes.error();
  for (const TraceNode& n : *nodes) in->nodes.push_back(to_node(n));
  std::sort(in->nodes.begin(), in->nodes.end(),
            [](const model::Node& a, const model::Node& b) { return a.name < b.name; });
  if (gpu_capacity_milli(in->nodes) == 0) return nodes_path + ": no GPUs in the node list";
  for (const std::string& path : pod_paths) {
    auto pods = load_pods(path);
    if (!pods) return pods.error();
    in->workloads.push_back(prepare_workload(trace_name(path), std::move(*pods)));
  }
  return "";
}

Progress stderr_progress(bool terminal) {
  auto start = std::chrono::steady_clock::now();
  auto last_pct = std::make_shared<int>(-1);
  return [=](int done, int total, const std::string& what) {
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double left = done > 0 ? secs / done * (total - done) : 0;
    const int pct = total > 0 ? 100 * done / total : 100;
    if (!terminal && pct / 5 == *last_pct / 5 && done != total) return;
    *last_pct = pct;
    std::fprintf(stderr, "%sgapless-bench: %d/%d runs (%d%%), %.0f s, ~%.0f s left: %s%s",
                 terminal ? "\r\033[K" : "", done, total, pct, secs, left, what.c_str(),
                 terminal && done != total ? "" : "\n");
    std::fflush(stderr);
  };
}

namespace {

// The seeded arrivals of every (trace, seed), shared by all policies: [w * seeds + s].
std::vector<Arrivals> all_arrivals(const SweepInput& in) {
  const std::int64_t capacity = gpu_capacity_milli(in.nodes);
  const std::size_t S = in.seeds.size();
  std::vector<Arrivals> arrivals(in.workloads.size() * S);
  for (std::size_t w = 0; w < in.workloads.size(); ++w) {
    for (std::size_t s = 0; s < S; ++s) {
      arrivals[w * S + s] = make_arrivals(in.workloads[w], capacity, in.nodes.size(),
                                          static_cast<std::uint64_t>(in.seeds[s]), in.tune);
    }
  }
  return arrivals;
}

}  // namespace

std::vector<LimitCell> run_limits(const SweepInput& in, unsigned threads,
                                  const Progress& progress) {
  const std::size_t W = in.workloads.size(), S = in.seeds.size();
  const std::vector<Arrivals> arrivals = all_arrivals(in);
  std::vector<LimitCell> cells(W);
  for (std::size_t w = 0; w < W; ++w) {
    cells[w].trace = in.workloads[w].name;
    cells[w].seeds = in.seeds;
    cells[w].limits.resize(S);
  }
  run_jobs(
      static_cast<int>(W * S), threads,
      [&](int job) {
        const std::size_t s = job % S, w = job / S;
        cells[w].limits[s] = compute_limit(in.nodes, in.workloads[w], arrivals[job]);
        return cells[w].trace + " limit x seed " + std::to_string(in.seeds[s]);
      },
      progress);
  return cells;
}

std::vector<Cell> run_sweep(const SweepInput& in, unsigned threads, const Progress& progress) {
  const std::int64_t capacity = gpu_capacity_milli(in.nodes);
  const std::size_t W = in.workloads.size(), P = in.policies.size(), S = in.seeds.size();
  const std::vector<Arrivals> arrivals = all_arrivals(in);
  std::vector<Cell> cells(W * P);
  for (std::size_t w = 0; w < W; ++w) {
    for (std::size_t p = 0; p < P; ++p) {
      Cell& c = cells[w * P + p];
      c.mode = !in.deployed ? "" : in.extender_url.empty() ? "deployed" : "http";
      c.trace = in.workloads[w].name;
      c.policy = in.policies[p].label;
      c.seeds = in.seeds;
      c.curves.resize(S);
      c.seconds.resize(S);
      c.failed.resize(S);
    }
  }
  run_jobs(
      static_cast<int>(W * P * S), threads,
      [&](int job) {
        const std::size_t s = job % S, p = job / S % P, w = job / S / P;
        const auto seed = static_cast<std::uint64_t>(in.seeds[s]);
        RunResult r;
        if (in.deployed) {
          auto port = in.extender_url.empty() ? in_process_extender(in.nodes, in.policies[p])
                                              : http_extender(in.extender_url);
          r = replay_deployed(in.nodes, in.workloads[w], arrivals[w * S + s], *in.deployed, *port,
                              seed);
        } else {
          r = replay(in.nodes, in.workloads[w], arrivals[w * S + s], in.policies[p], seed);
        }
        Cell& c = cells[w * P + p];
        c.curves[s] = bucket(r.events, capacity);
        c.seconds[s] = r.seconds;
        c.failed[s] = r.failed;
        return c.trace + " x " + c.policy + " x seed " + std::to_string(in.seeds[s]);
      },
      progress);
  return cells;
}

}  // namespace gapless::bench
