// A sweep: every (trace, policy, seed) run, spread over worker threads. The arrival sequence of a
// (trace, seed) is the same for every policy, so comparisons between policies are paired.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <optional>
#include "gapless/model/node.h"

#include "deployed.h"
#include "limit.h"
#include "replay.h"
#include "report.h"

namespace gapless::bench {

struct SweepInput {
  std::vector<model::Node> nodes;  // sorted by name
  std::vector<Workload> workloads;
  std::vector<PolicySetup> policies;
  std::vector<int> seeds;
  double tune = 1.3;
  // As-deployed mode (deployed.h): every run goes through the emulated kube-scheduler with this
  // configuration, to the extender in-process, or over HTTP at extender_url (one run only: the
  // live extender's model is not reset between runs).
  std::optional<SchedulerConfig> deployed;
  std::string extender_url;
};

// Loads the node list and the pod lists into `in`. Returns an error message, or "" on success.
std::string load_inputs(const std::string& nodes_path, const std::vector<std::string>& pod_paths,
                        SweepInput* in);

// Called after each finished run: runs done, runs in all, what just finished.
using Progress = std::function<void(int done, int total, const std::string& what)>;
// A progress line on stderr: rewritten in place on a terminal, every 5 % otherwise.
Progress stderr_progress(bool terminal);

// Cells in (trace, policy) order, each with every seed's curve. threads >= 1.
std::vector<Cell> run_sweep(const SweepInput& in, unsigned threads, const Progress& progress);

// The limit (limit.h) of every (trace, seed), on the same arrivals the policies see; one cell per
// trace, in trace order.
std::vector<LimitCell> run_limits(const SweepInput& in, unsigned threads, const Progress& progress);

}  // namespace gapless::bench
