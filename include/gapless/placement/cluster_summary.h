// What operators watch about the cluster model, per GPU model: fragmentation under the learned
// workload mix (FGD's F_n(M)) and stranding, free nodes, allocated vs capacity per resource kind,
// and the largest free NVLink-connected GPU set per node. Plain data for the metrics driver; the
// engine knows nothing of how it is exported.
//
// Thread-safety: summarize() and LiveSummary's methods only read the nodes and the fragment cache;
// the caller holds a lock on them (Scheduler does: the write lock to keep a LiveSummary current,
// the shared lock to read it).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <unordered_map>

#include "gapless/model/node.h"
#include "gapless/placement/fragmentation.h"

namespace gapless::placement {

// Per GPU model (a node with several models counts under each, for its GPUs of that model; its
// node-level measures go to its first GPU's model).
struct ModelSummary {
  double fragment_milli = 0;  // sum of F_n(M): idle GPU the learned mix could not use
  double stranded_milli = 0;  // sum of node_stranding: idle GPU left after packing the mix
  double nodes = 0;           // nodes, fenced included
  double free_nodes = 0;      // unfenced nodes with at least one GPU, all of them idle
  double gpus = 0;            // GPUs (capacity for whole-GPU pods)
  double gpus_whole = 0;      // GPUs held whole by one pod
  // Shared GPUs (gapless.io/gpu-memory / -compute): capacity is every non-MIG GPU's.
  double shared_memory_capacity_bytes = 0;
  double shared_memory_allocated_bytes = 0;
  double shared_compute_capacity_milli = 0;
  double shared_compute_allocated_milli = 0;
  // Free vRAM on shared GPUs whose compute is all handed out, and free compute on shared GPUs
  // whose vRAM is: capacity no further share can use.
  double shared_memory_stranded_bytes = 0;
  double shared_compute_stranded_milli = 0;
  bool operator==(const ModelSummary&) const = default;
};

struct MigSummary {
  double capacity = 0;   // instances (static layouts and MIG pools)
  double allocated = 0;  // of those, in use
  bool operator==(const MigSummary&) const = default;
};

// Nodes by the size of their largest free NVLink-connected GPU set: index k <= kMaxSetBucket
// counts nodes whose largest such set has k GPUs (0: no free GPU); the last index, those above.
inline constexpr std::size_t kMaxSetBucket = 8;

struct ClusterSummary {
  // Whole-cluster counts: GPUs by health, GPUs in use by how (a GPU with shares counts as
  // shared, one with a MIG instance in use as mig), vRAM handed out as shares, nodes by state.
  double gpus_healthy = 0, gpus_unhealthy = 0;
  double gpus_in_use_whole = 0, gpus_in_use_shared = 0, gpus_in_use_mig = 0;
  double vram_allocated_bytes = 0;
  double nodes_ready = 0, nodes_fenced = 0;
  std::map<std::string, ModelSummary> models;  // by GPU model ("" when the inventory says none)
  std::map<std::string, MigSummary> mig;       // by MIG profile
  std::array<std::uint64_t, kMaxSetBucket + 2> largest_free_nvlink_set{};
  double largest_free_nvlink_set_sum = 0;  // of the sizes, over all nodes
  bool operator==(const ClusterSummary&) const = default;
};

// One pass over the nodes; F_n(M) and stranding come from the cache (kept current by its owner),
// so a summary costs O(GPUs) plus one small clique search per node. F_n(M) and stranding are
// rounded to 1/1024 milli-GPU per node, so that every sum here is exact in a double and a
// LiveSummary, which adds and subtracts nodes, stays equal to a fresh summarize().
ClusterSummary summarize(std::span<const model::Node* const> nodes, const FragmentCache& fragments);

// The summary kept current node by node: a scrape reads it in O(GPU models + MIG profiles)
// instead of walking every GPU (issue 13: 12 ms per scrape at 10,000 nodes). Each change costs
// one node's summary. Nodes are keys only in erase(), never dereferenced there.
class LiveSummary {
 public:
  // Recomputes every node (start-up, a new cluster).
  void rebuild(std::span<const model::Node* const> nodes, const FragmentCache& fragments);
  // The mix changed: only F_n(M) and stranding moved. Takes them from the (rebuilt) cache for
  // each node already summarized, leaving the counts and clique sizes as they are: a mix change
  // at 5,000 nodes then costs a pass over the cache, not a summary per node.
  // REQUIRES: every node summarized is still alive (erase() has seen those that left).
  void refresh_fragments(const FragmentCache& fragments);
  // Recomputes one node added or changed since.
  void refresh_node(const model::Node& node, const FragmentCache& fragments);
  // Takes out a node that left the cluster.
  void erase(const model::Node* node);
  // Equal to summarize() over the nodes it was given.
  const ClusterSummary& total() const { return total_; }

 private:
  std::unordered_map<const model::Node*, ClusterSummary> per_node_;
  ClusterSummary total_;
};

// The size of the largest set of free, healthy GPUs of the node whose pairs are all NVLink
// (1 when a GPU is free but has no NVLink peer free; 0 when none is free or the node is fenced).
int largest_free_nvlink_set(const model::Node& node);

}  // namespace gapless::placement
