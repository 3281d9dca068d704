// One replay of the FGD paper's experiment (docs/packing-benchmark.md §3) through the placement
// engine: a seeded arrival sequence tuned to 130 % of GPU capacity, pods submitted one at a time,
// never leaving, dropped when no node fits, the node with the best score taken (ties: a seeded
// node order), the GPUs inside it chosen by the profile, the allocation committed to a
// model::Cluster. Records the metrics of metrics.h after every pod.
//
// Thread-safety: a Workload is read-only once prepared and may be shared by concurrent replays;
// each replay builds its own cluster and caches.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "gapless/model/allocation.h"
#include "gapless/model/node.h"
#include "gapless/model/request.h"
#include "gapless/placement/profile.h"
#include "gapless/placement/workload.h"
#include "metrics.h"
#include "trace.h"

namespace gapless::bench {

// A pod list prepared for replay.
struct Workload {
  std::string name;                         // "default", "multigpu50", ...
  std::vector<TracePod> pods;               // sorted by name
  std::vector<model::GpuRequest> requests;  // aligned with pods
  std::vector<int> request_class;           // aligned: equal requests share a class
  int classes = 0;
  placement::WorkloadMix oracle;  // the untuned trace's typical pods (§2.1)
};
Workload prepare_workload(std::string name, std::vector<TracePod> pods);

// The seeded part of one run, shared by every policy (common random numbers).
struct Arrivals {
  std::vector<int> order;          // indices into Workload::pods, in submission order
  std::vector<int> node_priority;  // per node (name order): lower wins a score tie
};

// §3 with our RNG: shuffle the name-sorted pods; while the GPU request exceeds ratio x capacity
// remove a random pod; while it is below, append a random pod of the original list (stopping at
// the first whose per-GPU milli would overshoot, the simulator's quirk); then a random node
// order.
Arrivals make_arrivals(const Workload& w, std::int64_t capacity_milli, std::size_t node_count,
                       std::uint64_t seed, double ratio = 1.3);

struct PolicySetup {
  std::string label;           // as given on the command line: a strategy name or a YAML path
  placement::Profile profile;  // context is filled in by the replay
  // Score against the trace's typical pods (the FGD paper's oracle) instead of a mix learned
  // online from the pods seen so far.
  bool oracle_mix = false;
  // The policy's consolidation knobs (off; the dynamic replay turns it on with --movable).
  placement::ConsolidationRules consolidation;
};

// The policy a bench run places with: the setup's profile alone, as the default.
placement::Policy policy_of(const PolicySetup& setup);
// The GPU milli an allocation holds (a whole GPU is 1000, a share its compute).
std::int64_t granted_milli(const model::Allocation& a);

struct RunResult {
  std::vector<Event> events;  // one per submitted pod
  int placed = 0;
  int failed = 0;
  double seconds = 0;
};

// REQUIRES: nodes sorted by name, with arrivals made for that many nodes.
RunResult replay(const std::vector<model::Node>& nodes, const Workload& w, const Arrivals& a,
                 const PolicySetup& policy, std::uint64_t seed);

std::int64_t gpu_capacity_milli(const std::vector<model::Node>& nodes);

// --- Dynamic mode (ours; no published anchor) ----------------------------------------------
//
// Pods arrive at creation_time / speedup, in creation order, and each runs for its trace
// lifetime (deletion_time - creation_time, never scaled) from the moment it starts: with
// speedup 1 a pod that starts on arrival leaves at its deletion_time. A pod that fits nowhere
// waits in a FIFO queue. Every departure frees capacity, and the waiting pods are then retried
// in arrival order, without head-of-line blocking (a pod that still does not fit keeps its
// place and the next one is tried). A new arrival is tried at once, as kube-scheduler's active
// queue does. At one instant departures come first, then the retry, then arrivals.
//
// The retries are bounded by construction: a waiting pod failed on every node when last tried
// and placements only take room, so it is re-checked (quick_fit) only against the nodes that
// freed room since, and once one pod of a request class is found not to fit, the rest of its
// class wait without a check until the next departure. A pod is scored against all nodes (the
// static replay's placement path) only when one of them fits it, and then it is placed.
// Optionally a pod gives up after max_wait seconds.
//
// The replay runs until every pod has arrived and every started pod has left; pods still
// waiting then (or that gave up) were never placed. Allocation is measured over the arrival
// window [0, last arrival], and over the time when pods wait; the curves run on past the last
// arrival for as long again (curve_span), so that the drain shows.

struct DynamicOptions {
  double speedup = 1;   // arrival times are creation_time / speedup; lifetimes are not scaled
  double max_wait = 0;  // seconds a pod waits before it gives up; 0: it waits forever
  // DynamicRun::multi_gpu_longest_bound: DynamicPath::earliest_room for every multi-GPU pod
  // that does not start on arrival (a pass over the nodes each; up to 10x slower a run).
  bool least_waits = false;
  // Consolidation (docs/consolidation.md): this fraction of the pods, drawn per seed, are movable
  // (opted in), the policy's consolidation is on with its shipped knobs, and a multi-GPU pod that
  // fits no node, on arrival or on a retry, gets the plan applied. 0: off.
  double movable = 0;
  int max_moves = 0;       // consolidation's maxMovesPerPlan for this run; 0: the policy's
  int curve_points = 201;  // samples of the curves over [0, curve_span x last arrival]
  double curve_span = 2;
};

// DynamicOptions::movable, shared by the in-process and the as-deployed replay: each arrival
// movable with probability `fraction`, drawn from the seed alone (the same pods for every
// policy and path of a seed); and the policy with its consolidation on (and maxMovesPerPlan
// set) when `options` asks for movable pods.
std::vector<char> draw_movable(std::size_t arrivals, double fraction, std::uint64_t seed);
PolicySetup with_consolidation(PolicySetup policy, const DynamicOptions& options);

// Pods in creation order; pods created at the same second in a seeded order. Node priorities
// as in make_arrivals. REQUIRES: every pod has times (TracePod::has_times()).
Arrivals make_dynamic_arrivals(const Workload& w, std::size_t node_count, std::uint64_t seed);

struct DynamicRun {
  // Per arrival (aligned with Arrivals::order), in seconds; -1 for a pod never placed.
  std::vector<double> arrival, start;
  int arrived = 0;
  int started = 0;
  int never_placed = 0;  // gave up after max_wait, or still waiting when nothing was left to free
  // Over the started pods: pending time = start - arrival, in seconds.
  double pending_mean = 0, pending_p50 = 0, pending_p99 = 0, pending_max = 0;
  double waited_pct = 0;  // started pods that waited at all, % of started pods
  // The same over the started multi-GPU pods (2 or more whole GPUs), the ones a packing that
  // leaves no whole host free makes wait longest; 0 where the trace has none.
  int multi_gpu_started = 0;
  double multi_gpu_pending_mean = 0, multi_gpu_pending_p99 = 0, multi_gpu_pending_max = 0,
         multi_gpu_waited_pct = 0;
  // Consolidation (DynamicOptions::movable): plans applied, pods moved, moved pods per 1,000
  // arrivals, and the GPU-time lost: each moved pod restarts from scratch, so the GPU-seconds
  // it had run (granted GPUs x time since it last started) are lost. A moved pod that the
  // model could not place again after all (never expected) is counted in moved_unplaced and
  // waits again.
  int plans_applied = 0;
  int moves = 0;
  double moves_per_1000 = 0;
  double gpu_seconds_lost = 0;
  int moved_unplaced = 0;
  // For the multi-GPU pod that waited longest: DynamicPath::earliest_room at its arrival minus
  // its arrival, the least it could have waited once it arrived (0 where none waited; NaN
  // without DynamicOptions::least_waits and as deployed). Equal to multi_gpu_pending_max: its
  // wait was decided by where earlier pods went.
  double multi_gpu_longest_bound = 0;
  double horizon = 0;     // the last arrival, seconds
  double alloc_mean = 0;  // time-weighted GPU allocation % over [0, horizon]
  double alloc_peak = 0;  // the highest GPU allocation % reached in [0, horizon]
  // While at least one pod waits (anywhere in the run, the drain after the last arrival too):
  // how long that is, and the time-weighted GPU allocation % then (NaN if no pod ever waits).
  // What is idle while pods wait is what the policy's packing left unusable.
  double contended_s = 0;
  double alloc_contended = 0;
  // At curve_points instants spread evenly over [0, curve_span x horizon]: GPU allocation %,
  // pods waiting.
  std::vector<double> alloc_curve, waiting_curve;
  double seconds = 0;  // wall time of the run
};

// How the dynamic replay starts pods; the queue, the retries and the clock are the replay's.
// In-process (replay_dynamic with a PolicySetup): the engine's argmax, as the static replay.
// As deployed (deployed.h): kube-scheduler's cycle through the extender. Pods are indices into
// the Workload; `uid` names one arrival.
class DynamicPath {
 public:
  virtual ~DynamicPath() = default;
  virtual std::size_t node_count() const = 0;
  // The pod arrives (once, before its first attempt).
  virtual void arrive(int pod, const std::string& uid) = 0;
  // Whether a waiting pod may start on node n, which gained room since the pod last failed: a
  // check cheaper than an attempt and never stricter (a retry skips the pods it rules out).
  virtual bool may_fit(int pod, std::size_t n) const = 0;
  // One attempt to start the pod now: its node, with *granted the GPU milli it got, or
  // node_count() when it did not start.
  virtual std::size_t start(int pod, const std::string& uid, std::int64_t* granted) = 0;
  // The pod still waits at time t: its attempt on arrival failed, or a retry left it waiting.
  virtual void waiting(int pod, const std::string& uid, double t) = 0;
  // It gave up (DynamicOptions::max_wait) and is gone.
  virtual void gave_up(int pod, const std::string& uid) = 0;
  // It ran its lifetime on node n (start's answer) and left.
  virtual void left(int pod, const std::string& uid, std::size_t n) = 0;
  // A diagnostic for a pod that did not start on arrival at t: the earliest time any node
  // could take it had nothing new been placed after t, the pods running then leaving at
  // leaves_at(uid) (the trace's lifetimes, which no scheduler knows). No queue order, drain
  // target or policy acting after t can start the pod sooner without evicting a pod. NaN where
  // the path cannot tell (as deployed: the model is the extender's).
  using LeavesAt = std::function<double(const std::string& uid)>;
  // Consolidation: the pod fits no node at t; the path may move movable pods (each started at
  // started_at(uid)) so it starts. Nullopt when it made no room; else the pod's node and
  // granted milli, and every moved pod's new node (node_count() if it did not start again).
  struct Moved {
    std::string uid;
    std::size_t node = 0;
    std::int64_t granted = 0;
  };
  struct Room {
    std::size_t node = 0;
    std::int64_t granted = 0;
    std::vector<Moved> moved;
  };
  virtual std::optional<Room> make_room(int pod, const std::string& uid, double t,
                                        const LeavesAt& started_at) {
    (void)pod, (void)uid, (void)t, (void)started_at;
    return std::nullopt;
  }
  virtual double earliest_room(int pod, double t, const LeavesAt& leaves_at) const {
    (void)pod, (void)t, (void)leaves_at;
    return std::numeric_limits<double>::quiet_NaN();
  }
};

// REQUIRES: nodes sorted by name, arrivals from make_dynamic_arrivals for them.
DynamicRun replay_dynamic(const std::vector<model::Node>& nodes, const Workload& w,
                          const Arrivals& a, const PolicySetup& policy, std::uint64_t seed,
                          const DynamicOptions& options);
// The same queue and clock, the pods started by `path`. REQUIRES: arrivals for its nodes.
DynamicRun replay_dynamic(const std::vector<model::Node>& nodes, const Workload& w,
                          const Arrivals& a, DynamicPath& path, const DynamicOptions& options);

// Every seed's dynamic run of one policy on one trace.
struct DynamicCell {
  std::string trace;
  std::string policy;  // label as given on the command line
  std::vector<int> seeds;
  std::vector<DynamicRun> runs;  // per seed
  // As deployed (deployed.h): how the extender learns of waiting pods, "filter" or
  // "filter+unschedulable". Empty: in-process.
  std::string deployed_waits;
};

// One dynamic run of a policy; the sweep's default is replay_dynamic in-process.
using DynamicRunner =
    std::function<DynamicRun(const std::vector<model::Node>&, const Workload&, const Arrivals&,
                             const PolicySetup&, std::uint64_t seed, const DynamicOptions&)>;

// Every (trace, policy, seed) over `threads` workers; cells in (trace, policy) order. progress
// (may be empty) is called after each run with runs done, runs in all, and what finished.
// REQUIRES: nodes sorted by name; every pod of every workload has times; `runner` (when set)
// safe to call from several threads at once.
std::vector<DynamicCell> run_dynamic_sweep(
    const std::vector<model::Node>& nodes, const std::vector<Workload>& workloads,
    const std::vector<PolicySetup>& policies, const std::vector<int>& seeds,
    const DynamicOptions& options, unsigned threads,
    const std::function<void(int, int, const std::string&)>& progress,
    const DynamicRunner& runner = {});

}  // namespace gapless::bench
