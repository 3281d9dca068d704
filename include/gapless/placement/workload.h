// The workload mix: which pod shapes are expected next, and how often. Fragmentation-aware
// strategies (fgd, gapless) judge a placement by how much idle GPU it leaves unusable for
// these shapes. The mix is either given (the trace bench's oracle, as in the FGD paper) or
// learned online from the pods seen so far (WorkloadLearner; what a live cluster can know).
//
// Pure values; WorkloadLearner is not thread-safe (its owner serialises observe()).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "gapless/model/request.h"

namespace gapless::placement {

// A pod shape as the fragmentation measure sees it: the key of FGD's typical pods (docs/packing-
// benchmark.md §2.1). Memory is not part of it.
struct TaskShape {
  std::int64_t cpu_milli = 0;
  int milli = 0;                    // per GPU, 1..1000; 0 for a pod without GPUs
  int gpus = 0;                     // number of GPUs; 0 for a pod without GPUs
  std::vector<std::string> models;  // allowed GPU models as the pod lists them; empty = any
  // Host memory. Not part of FGD's key (the paper's measure ignores memory): 0 there.
  std::int64_t memory_mib = 0;

  bool operator==(const TaskShape&) const = default;
};

// Orders shapes as FGD's GetTypicalPods breaks count ties: by CPU, per-GPU milli, GPU count, then
// the model list joined with '|' (then memory, which FGD's shapes leave at 0).
bool shape_less(const TaskShape& a, const TaskShape& b);
struct ShapeLess {
  bool operator()(const TaskShape& a, const TaskShape& b) const { return shape_less(a, b); }
};

// The shape of a request: whole GPUs are milli 1000; a share is its compute (1000 when it asks
// vRAM only); MIG and gpushare requests count as one whole GPU each. Memory is left at 0 unless
// `with_memory`.
TaskShape shape_of(const model::GpuRequest& req, bool with_memory = false);

struct WorkloadMix {
  struct Entry {
    TaskShape shape;
    double weight = 0;  // p_m; the weights of a mix sum to 1
  };
  std::vector<Entry> entries;  // most common first
  // Per-GPU milli of every share seen (one GPU, less than 1000), the rare ones too, as
  // (milli, fraction of shares), ascending milli. Empty when unknown.
  std::vector<std::pair<int, double>> share_sizes;
  // Per GPU model (model::model_key): the fraction of all GPU demand seen (GPUs x milli, every
  // shape, the rare ones too) that pods naming models ask, split evenly over the models each names.
  // Pods that name no models are absent. The mix's entries drop rare shapes, and a model list
  // splits the restricted pods into many rare shapes; this keeps their total. Empty: none seen.
  std::vector<std::pair<std::string, double>> model_demand;
  // Every shape seen that asks two GPUs or more, the rare ones too, with its fraction of all
  // pods seen. The few that only a scarce kind of empty node can take (8 GPUs and 120 cores,
  // say) wait for one unless it is kept whole (FragmentCache::breaks_scarce_host).
  std::vector<std::pair<TaskShape, double>> multi_gpu_shapes;
  // The fraction of all GPU demand seen (GPUs x milli, every shape) that pods asking two GPUs or
  // more ask. Below a tenth or so, empty nodes are not scarce for them (gapless's share rule).
  double multi_gpu_demand = 0;
  // CPU milli a whole GPU comes with: the CPU of pods asking whole GPUs over their GPU count,
  // every such shape seen. 0 when none was seen. How much CPU a node must keep per idle GPU.
  double cpu_per_whole_gpu = 0;
  // CPU milli per GPU milli asked: the CPU of the pods asking GPUs (shares and whole GPUs) over
  // the GPU milli they ask, every such shape seen. 0 when none was seen. How much CPU a node
  // needs for the GPU room it has left to be of use (gapless's share rule).
  double cpu_per_gpu_milli = 0;

  bool empty() const { return entries.empty(); }
};

using ShapeCounts = std::map<TaskShape, double, ShapeLess>;

// FGD's typical pods (§2.1): shapes by count, descending (ties: the larger shape first), taken
// one by one until they cover `coverage` of all pods, then renormalised to sum to 1. Also fills
// share_sizes from all the counts.
WorkloadMix typical_mix(const ShapeCounts& counts, double coverage = 0.95);

// Learns the mix from the pods seen so far. The mix is rebuilt when the number of pods seen
// reaches 1, 2, 4, 8, ...: often while little is known, rarely once it has settled, so that
// drivers caching scores under the mix (FragmentCache, the bench's score memo) rarely flush.
class WorkloadLearner {
 public:
  explicit WorkloadLearner(double coverage = 0.95) : coverage_(coverage) {}

  // Counts one more pod of this shape. Returns true when mix() changed.
  bool observe(const TaskShape& shape);
  const WorkloadMix& mix() const { return mix_; }
  std::size_t observed() const { return seen_; }

 private:
  double coverage_;
  ShapeCounts counts_;
  std::size_t seen_ = 0;
  std::size_t next_rebuild_ = 1;
  WorkloadMix mix_;
};

}  // namespace gapless::placement
