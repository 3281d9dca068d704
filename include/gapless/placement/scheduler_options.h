// How the runner (placement::Scheduler) is set up, and the policy as it holds it: with the verdict
// cache of its profiles.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "gapless/placement/profile.h"
#include "gapless/placement/verdict_cache.h"
#include "gapless/placement/workload.h"

namespace gapless::placement {

struct SchedulerOptions {
  // Filter checks CPU and memory against the nodes' capacity (where nodes and pods carry them).
  // The trace bench's paper mode needs this: nothing else filters there. Behind kube-scheduler
  // (the extender, the bench's as-deployed mode) NodeResourcesFit has done it, so it is off:
  // host resources are then counted for scoring only and never refuse a reservation.
  bool check_host = true;
  // Score against this fixed mix instead of learning one (the FGD paper's oracle). Must outlive
  // the Scheduler.
  const WorkloadMix* fixed_mix = nullptr;
  // Reuse verdicts and scores of nodes unchanged since a pod of the same shape was asked about
  // (placement::VerdictCache). Off only to measure what the cache saves.
  bool use_cache = true;
  // Request shapes whose verdicts and scores the cache keeps (least recently used dropped).
  std::size_t cache_shapes = 32;
  // Request shapes warm() prepares: the most asked ones (each takes a filter and a score table
  // of the cache_shapes above).
  std::size_t warm_shapes = 8;
};

// A policy with the caches that belong to it: replaced together, so cached scores never outlive
// the profiles they were computed for. Profiles' contexts point at the Scheduler's mix.
struct LoadedPolicy {
  explicit LoadedPolicy(std::size_t cache_shapes) : cache(cache_shapes) {}
  Policy policy;
  mutable VerdictCache cache;
  // The mix version the cache's scores were computed under; a cache behind the Scheduler's
  // current version is not used (a policy replaced while the mix moved on).
  mutable std::atomic<std::uint64_t> cache_mix_version{0};
};

// Whether a strategy of the profile reads ScoreContext::draw (the random baseline): its scores
// are then the pod's own, and no cache may keep them.
bool profile_draws(const Profile& profile);

}  // namespace gapless::placement
