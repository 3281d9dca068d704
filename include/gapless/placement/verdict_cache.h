// Filter verdicts and prioritize scores, remembered per node for recently seen request shapes.
//
// kube-scheduler asks about every node for every pod, but a bind changes one node. With the
// answers for unchanged nodes reused, a pod costs one table lookup per node that has not changed
// since a pod of the same shape was asked about; only the nodes bound to since then are
// recomputed. An entry is valid while its node's Node::generation is unchanged (Cluster gives a
// node a new generation on every change to it), so a cached answer is always the answer the
// engine would compute now.
//
// Scores are reused only for profiles whose scores depend on nothing but the node and the
// request, or on a workload mix whose owner clears the cache when the mix changes (see
// scores_are_cacheable); the engine computes the others every time.
//
// One cache serves one policy: Profile pointers are part of the key, so build a fresh cache
// whenever the policy is replaced.
//
// Thread-safety: all methods may be called concurrently. One call at a time uses a shape's table:
// a call that finds it in use (another request of the same shape is in its loop, which for a
// body naming a million nodes takes seconds) does not wait for it but computes every answer
// itself, reusing and storing nothing (a bypass): the same answers, only not faster.
#pragma once

#include <atomic>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <vector>

#include "gapless/model/node.h"
#include "gapless/model/request.h"
#include "gapless/placement/profile.h"

namespace gapless::placement {

// True when a profile's node scores are a function of (node, request) alone, or of (node,
// request, workload mix) with ScoreContext::cache_owner_tracks_mix set: no per-pod random draw.
bool scores_are_cacheable(const Profile& profile);

class VerdictCache {
 public:
  // Keeps the tables of at most `max_shapes` (request, profile) pairs, dropping the least
  // recently used. Each table holds one small entry per node.
  explicit VerdictCache(std::size_t max_shapes = 32);
  VerdictCache(const VerdictCache&) = delete;
  VerdictCache& operator=(const VerdictCache&) = delete;

  struct Table;
  // Exclusive use of one shape's table for the length of one engine call, or (when another call
  // holds it) a bypass: get() finds nothing, put() keeps nothing.
  class Lease {
   public:
    // The value stored for this node at its current generation, if any.
    bool get(const model::Node& node, double* value);
    void put(const model::Node& node, double value);
    bool bypassed() const { return !lock_.owns_lock(); }

    Lease(Lease&&) = default;
    Lease& operator=(Lease&&) = delete;
    ~Lease();  // adds this call's hits and misses to the cache's counters

   private:
    friend class VerdictCache;
    Lease(std::shared_ptr<Table> table, VerdictCache* owner);
    std::shared_ptr<Table> table_;  // kept alive even if evicted meanwhile
    std::unique_lock<std::mutex> lock_;
    VerdictCache* owner_;
    std::uint64_t hits_ = 0;
    std::uint64_t misses_ = 0;
  };

  // The table for `req` under `profile` (null: filter verdicts, which no profile affects),
  // created empty if new; a bypass if another call holds it. Never waits for another call's
  // loop. `slots` is Cluster::slot_count().
  Lease lease(const model::GpuRequest& req, const Profile* profile, std::size_t slots);

  // Drops every table. REQUIRES: no Lease alive (the Scheduler calls it under its write lock
  // when the workload mix changes).
  void clear();
  // Drops the score tables (those of a profile) and keeps filter's verdicts, which no workload
  // mix affects: after a mix change filter still reuses every unchanged node's verdict.
  // REQUIRES: no Lease alive, as clear().
  void clear_scores();

  std::uint64_t hits() const { return hits_.load(std::memory_order_relaxed); }
  std::uint64_t misses() const { return misses_.load(std::memory_order_relaxed); }
  // Leases that found their table in use and computed without it.
  std::uint64_t bypasses() const { return bypasses_.load(std::memory_order_relaxed); }

 private:
  const std::size_t max_shapes_;
  std::mutex mu_;                             // guards tables_ (not their contents)
  std::list<std::shared_ptr<Table>> tables_;  // most recently used first
  std::atomic<std::uint64_t> hits_{0};
  std::atomic<std::uint64_t> misses_{0};
  std::atomic<std::uint64_t> bypasses_{0};
};

}  // namespace gapless::placement
