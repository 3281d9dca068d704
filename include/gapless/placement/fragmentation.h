// The GPU fragmentation measure of FGD (Weng et al., USENIX ATC '23), as the authors' simulator
// computes it (docs/packing-benchmark.md §2.2-2.3). All amounts are in milli-GPU.
//
// For a node n and an expected pod shape m, F_n(m) is the idle GPU capacity of n that m could not
// use: all of it when m cannot run on n now (too few GPUs with enough left, too little CPU, a model
// it does not accept, or m needs no GPU at all), otherwise the GPUs with less left than m needs.
// F_n(M) = sum of p_m F_n(m) over the workload mix M.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "gapless/model/node.h"
#include "gapless/model/request.h"
#include "gapless/placement/workload.h"

namespace gapless::placement {

double task_fragment(const model::Node& node, const TaskShape& m);
double node_fragment(const model::Node& node, const WorkloadMix& mix);

// F_n(M) after `req` would take `gpus` (GPU indices) on the node: a share takes its milli of each,
// a whole request all of each; its CPU leaves the node too. Empty `gpus`: CPU only.
double node_fragment_after(const model::Node& node, const WorkloadMix& mix,
                           const model::GpuRequest& req, std::span<const int> gpus);

// Stranding, the measure behind the gapless strategy: the idle GPU of the node that pods of shape
// m, placed one after another until the next no longer fits, would leave unused. GPU room
// (whole 1000-milli units for whole-GPU shapes, repeated shares per GPU otherwise), free CPU and
// free memory each bound how many fit. F_n(m) looks one pod ahead; this sees, say, that 8 idle
// GPUs beside 16 free cores are mostly stranded for 1-GPU pods asking 8 cores each. A shape
// without GPUs, or one the node's models exclude, strands all idle GPU, as in F_n(m).
double task_stranding(const model::Node& node, const TaskShape& m);
double node_stranding(const model::Node& node, const WorkloadMix& mix);  // sum of p_m x that
double node_stranding_after(const model::Node& node, const WorkloadMix& mix,
                            const model::GpuRequest& req, std::span<const int> gpus);

// F_n(M) (and stranding) of every node, kept current one node at a time: after a placement only
// the node that changed is recomputed (update), and the cluster total moves by that node's
// difference. Also remembers, per node and shape, which GPUs the shape's model list admits, so
// scoring does not compare model strings.
//
// Nodes are identified by address: they must stay where they are (model::Cluster keeps them put).
// Not thread-safe; REQUIRES: the mix outlives the cache.
class FragmentCache {
 public:
  explicit FragmentCache(const WorkloadMix& mix) : mix_(&mix) {}

  // Recomputes every node, e.g. after the mix changed.
  void rebuild(std::span<const model::Node* const> nodes);
  // rebuild() over the nodes the cache holds, reusing their slots: for a mix change, when the
  // cache already follows every node (no sorted node list to build, no slot to allocate).
  void remix();
  // Recomputes one node after a placement on it.
  void update(const model::Node& node);
  // Recomputes one node, adding it if the cache has not seen it (a node added to the cluster).
  void refresh_node(const model::Node& node);
  // Forgets a node that left the cluster; `node` is only a key, never dereferenced.
  void erase(const model::Node* node);

  // Cached F_n(M); computed on the spot for a node the cache has not seen.
  double fragment(const model::Node& node) const;
  // node_fragment_after, using the cached model masks.
  double fragment_after(const model::Node& node, const model::GpuRequest& req,
                        std::span<const int> gpus) const;
  // The same two for stranding (node_stranding, node_stranding_after).
  double stranding(const model::Node& node) const;
  double stranding_after(const model::Node& node, const model::GpuRequest& req,
                         std::span<const int> gpus) const;
  // The model term, per GPU of the node in index order: how much the pods that name GPU models
  // need that GPU's model beyond an even share, 0..1: their learned share of all GPU demand
  // (WorkloadMix::model_demand) over the model's share of the GPUs of the nodes given to
  // rebuild, capped at 1, less the share of all GPU demand that names any model (0 where that
  // is more). A pod that names no model and takes such a GPU takes room those pods can find
  // nowhere else. Empty for a node the cache has not seen, and when no pod named a model.
  std::span<const float> model_reserves(const model::Node& node) const;
  // True when `req` taking `gpus` would leave the node unable to take a multi-GPU shape of the
  // mix (WorkloadMix::multi_gpu_shapes) that it can take now, and that only a scarce kind of
  // node can take even when empty (at most kScarceHostShare of the nodes given to rebuild).
  // Such pods otherwise wait until every pod on some such node has left.
  bool breaks_scarce_host(const model::Node& node, const model::GpuRequest& req,
                          std::span<const int> gpus) const;
  static constexpr double kScarceHostShare = 0.05;
  // True while the empty hosts (nodes of two GPUs or more with nothing on any GPU) hold more
  // GPUs than the multi-GPU pods' part of the demand (WorkloadMix::multi_gpu_demand) of the idle
  // GPUs of the nodes the cache follows. The pods still to come fill the idle GPUs in the mix's
  // proportions, and that part of them needs GPUs that are idle together on one node; beyond it
  // an empty host can be given to shares without leaving the multi-GPU pods none.
  bool empty_hosts_to_spare() const;
  // Sum of F_n(M) over the nodes given to rebuild.
  double total() const { return total_; }
  const WorkloadMix& mix() const { return *mix_; }

 private:
  const std::uint64_t* access(const model::Node& node) const;

  struct Slot {
    double value = 0;                   // F_n(M)
    double stranded = 0;                // node_stranding
    std::vector<std::uint64_t> access;  // per mix entry: GPUs whose model the shape admits
    std::vector<float> reserve;         // model_reserves; empty when all 0
    // scarce_ shapes this node can take when empty, with the GPUs whose model each admits
    std::vector<std::pair<std::size_t, std::uint64_t>> hosts;
    int idle_gpus = 0;        // the node's GPUs with nothing on them
    int empty_host_gpus = 0;  // all its GPUs when that is every one of two or more, else 0
  };
  // rebuild() and remix(): the mix-wide inputs from `nodes`, then each node's slot (created if
  // missing) described and refreshed, total_ summed in `nodes` order.
  void recompute(std::span<const model::Node* const> nodes);
  // Fills slot.access and slot.reserve, which depend on the node's GPUs, not on their use.
  void describe(const model::Node& node, Slot& slot) const;
  const WorkloadMix* mix_;
  // Recomputes a slot's fragment and stranding from the node's state; returns the change in value.
  double refresh(const model::Node& node, Slot& slot);
  std::unordered_map<const model::Node*, Slot> slots_;
  std::vector<std::pair<std::string, double>> reserve_;  // model::model_key -> model_reserves
  std::vector<TaskShape> scarce_;  // multi-GPU shapes only few nodes can take (hosts)
  double total_ = 0;
  long long idle_gpus_ = 0;        // sum of Slot::idle_gpus
  long long empty_host_gpus_ = 0;  // sum of Slot::empty_host_gpus
};

}  // namespace gapless::placement
