// gapless: Gapless's own strategy (the default policy's). It learns nothing itself: it reads the
// workload mix the driver learns online from the pods seen so far (ScoreContext::workload; no
// oracle), and applies one of two rules by what the pod asks.
//
// A share (part of one GPU) goes to the GPU where it leaves the least *dead* room, cluster-wide.
// What sinks GPU utilisation in a cluster of shares is the room left next to them that no later
// share fits: the 190 milli beside an 810 share, say. A gap is dead when fewer than 5 % of the
// shares in the mix fit it; dead room counts as waste for good, live room as a small expected
// waste (40 milli, what a live gap is typically left with once filled), and opening a fresh GPU
// costs 50 milli more, because whole-GPU pods need fresh GPUs. The share takes the GPU with the
// least waste added. Plain best fit (least room left) lands a 320 in a 530 gap, leaving 210 that
// nobody fits; this rule prefers a 680 gap, whose 360 another 320 still fits. The live room a
// share leaves its node without the CPU to use counts as waste too (cpu_stranded_added below).
// Remaining ties among nodes are broken by CPU (share_cpu_ties below), since the cores a share
// takes can strand a node's idle GPUs; then node order (preferring plainly the node with the most
// CPU and memory left did better on the default trace and far worse on multigpu and gpuspec).
//
// Whole GPUs and pods without GPUs: the least growth of *stranded* GPU under the mix
// (fragmentation.h): the idle GPU that pods of each expected shape, placed one after another,
// could not use because GPU room, CPU or memory runs out first. FGD's fragment looks one pod
// ahead; this sees that 8 idle GPUs beside 16 free cores are mostly stranded for 1-GPU pods that
// ask 8 cores each. Scores are cut to FGD's 0..100 scale, so near-equal nodes tie and fall back
// to node order (keeping every digit measured slightly worse).
//
// Two terms read the driver's FragmentCache, which knows the cluster's nodes:
// - the model term: a pod that names no GPU model pays for the room it takes on GPUs of a model
//   that model-restricted pods need (FragmentCache::model_reserves; weight kModelWeight, tuned on
//   gpuspec20/25/33: 1.0 and 0.5 cost the unrestricted pods too much, 0.1 left gpuspec33 at 9.8;
//   a share pays kShareModelWeight, matched to the share rule's CPU term);
// - the keep-whole term: a placement that leaves a scarce host (a G3 node, say, the only one that
//   takes an 8-GPU pod asking 120 cores) unable to take that shape costs kKeepWholeCost. Without
//   it such pods waited until every pod on some such node had left (dynamic mode: 2,221 s max).
//
// Without a mix (no driver learning one), the request's own shape stands in for it.
#include <algorithm>
#include <array>
#include <cmath>
#include <span>
#include <vector>

#include "gapless/placement/demand.h"
#include "gapless/placement/fragmentation.h"
#include "strategies.h"

namespace gapless::placement {
namespace {

constexpr double kDeadBelow = 0.05;  // a gap fewer than this share of the shares fit is dead
constexpr int kLiveGapWaste = 40;    // milli a live gap is expected to end with
constexpr int kFreshGpuCost = 50;    // milli for opening a GPU nothing uses yet
// Measured effects below (issue 27): "tuning half" is bench/traces/synthetic's tune-* traces,
// seeds 42-44, as deployed, before the model term's reserve became r - c; the validation half
// (val-*) was measured only with the shipped constants, all of them (bench/README.md,
// Generalization).
//
// Weight of the model term: a pod naming no model that takes m milli of a GPU whose model the
// model-restricted pods need at reserve r (FragmentCache::model_reserves) costs kModelWeight*r*m.
// Alibaba gpuspec20 / 25 / 33: without it 4.44 / 6.77 / 12.03 (FGD 5.34 / 6.09 / 12.16). Tuning
// half: 0 beat 0.25 on five of six traces (tune-spec 2.82 against 3.52), by the cost the term put
// on models nobody crowds; the reserve's r - c (fragmentation.cpp) removes that cost instead.
constexpr double kModelWeight = 0.25;
// Milli a placement costs for leaving a scarce host unable to take the big shape it can take now
// (scarce: FragmentCache::kScarceHostShare, 5 % of the nodes). Tuning half: with no scarce hosts
// (0 %) tune-infer 2.16 and tune-modern 5.57 against 2.07 and 5.49, the rest unchanged; at 20 %
// tune-modern 3.96 but tune-train 2.11 against 1.22 and tune-spec 5.75 against 3.52: kept at 5 %.
constexpr double kKeepWholeCost = 1000;
// The share rule's CPU tie-breaks, in milli of waste per core short and per partly used GPU:
// small enough to order only nodes whose waste is otherwise equal (wastes differ by >= 1 milli).
constexpr double kTieBreak = 0.001;
// Multi-GPU pods asking less than this fraction of the GPU demand (WorkloadMix::
// multi_gpu_demand) leave enough empty nodes for themselves when shares open GPUs on them. At
// 0.35 the multigpu30 trace (0.30 of demand) lost its hosts: 5.07 % unallocated, not 3.32.
// Alibaba default: 4.06 without the spread, 3.85 with it. Tuning half (multi-GPU demand 15-81 %,
// so it acts early in a run at most): without it tune-infer 2.10, tune-spec 3.46, tune-mem 8.61
// against 2.07, 3.52, 8.43, within one seed's sd (0.4-2.8): no measurable effect either way.
constexpr double kSpreadBelowMultiDemand = 0.15;
// Milli of waste per milli of live GPU room a share leaves its node without the CPU to use
// (cpu_stranded_room below). 1: room stranded for want of CPU is as lost as dead room. As
// deployed, seeds 42-45 (issue 42): 0.1 / 0.3 / 1 / 3 gave gpushare100 12.03 / 11.99 / 11.97 /
// 11.98 (without: 13.17), gpushare60 7.77 / 7.77 / 7.77 at 0.3 / 1 / 3 (8.07). Seeds 42-51 at
// 1: gpushare60 / 80 / 100 8.08 / 10.25 / 13.24 -> 7.79 / 9.73 / 11.98, default 3.87 -> 3.86; the
// cost, gpuspec33 7.31 -> 8.09 (CPU-heavy shares went to the CPU-rich T4 boxes its pinned pods
// need) until kShareModelWeight and usable_demand below.
constexpr double kCpuStrandedWeight = 1.0;
// Weight of the model term in the share rule (the whole-GPU rule keeps kModelWeight). The CPU
// term above charges stranded room milli for milli, hundreds of milli on a CPU-short node, and
// against it a quarter of r*m let CPU-heavy shares through to the CPU-rich nodes of a crowded
// model (the Alibaba T4 boxes, 52 cores a GPU, r 0.65 on gpuspec33). As deployed, seeds 42-51,
// gpuspec33 / val-spec (before the CPU term 7.31 / 6.00; with it at 0.25: 8.09 / 6.32): 1 7.66 /
// 6.00, 1.5 7.32 / 6.14, 2 7.14 / 6.24, 3 7.13 / 6.37; 2 with the CPU term scaled by the demand
// that can use the node (usable_demand) 7.08 / 5.90. On seeds 52-61 (not used to choose)
// gpuspec33 7.47 / 8.28 / 7.17 and val-spec 5.80 / 6.05 / 6.18 (before / CPU term / now). A trace
// whose pods name no model has no reserves, so this acts on the model-pinned traces only.
constexpr double kShareModelWeight = 2.0;

bool single_share(const model::GpuRequest& req) {
  return req.kind == model::RequestKind::kShared && req.shared.count == 1 &&
         req.shared.compute_milli < model::kFullComputeMilli;
}

// The mix to judge by: the context's, or the request alone.
class MixView {
 public:
  MixView(const ScoreContext& ctx, const model::GpuRequest& req) {
    if (ctx.workload != nullptr && !ctx.workload->empty()) {
      mix_ = ctx.workload;
    } else {
      own_.entries.push_back({shape_of(req, true), 1.0});
      mix_ = &own_;
    }
  }
  const WorkloadMix& operator*() const { return *mix_; }

 private:
  const WorkloadMix* mix_;
  WorkloadMix own_;
};

// The smallest gap that at least kDeadBelow of the shares fit; 1 when no shares are known.
int live_gap(const WorkloadMix& mix) {
  std::vector<std::pair<int, double>> from_entries;
  if (mix.share_sizes.empty()) {  // a mix built by hand: its entries are all we know
    for (const auto& e : mix.entries) {
      if (e.shape.gpus == 1 && e.shape.milli > 0 && e.shape.milli < model::kFullComputeMilli) {
        from_entries.emplace_back(e.shape.milli, e.weight);
      }
    }
    std::sort(from_entries.begin(), from_entries.end());
  }
  const auto& shares = mix.share_sizes.empty() ? from_entries : mix.share_sizes;
  double total = 0, fit = 0;
  for (const auto& s : shares) total += s.second;
  for (const auto& [milli, w] : shares) {
    fit += w;
    if (fit >= kDeadBelow * total) return milli;
  }
  return 1;
}

// Expected waste of `room` milli left on a GPU: all of it when dead, a little when live, none
// on an untouched GPU.
int gap_waste(int room, int live) {
  if (room >= model::kFullComputeMilli) return 0;
  return room < live ? room : kLiveGapWaste;
}

// Waste a share of `milli` adds on a GPU with `room` left.
int added_waste(int room, int milli, int live) {
  const int fresh = room >= model::kFullComputeMilli ? kFreshGpuCost : 0;
  return gap_waste(room - milli, live) - gap_waste(room, live) + fresh;
}

// Added waste in -1000..1050 -> (0, 1], higher is better; the model term can push it past 2000,
// which clamps to 0.
double waste_score(double waste) {
  return std::max(0.0, (2.0 * model::kFullComputeMilli - waste) / (3.0 * model::kFullComputeMilli));
}

// The model term per GPU of the node (FragmentCache::model_reserves); empty for a pod that
// names models itself, or without the driver's cache (it knows the cluster's GPU models).
std::span<const float> reserves(const ScoreContext& ctx, const model::Node& node,
                                const model::GpuRequest& req) {
  if (ctx.fragments == nullptr || !req.models.empty()) return {};
  return ctx.fragments->model_reserves(node);
}

double model_cost(std::span<const float> reserve, int gpu, int milli,
                  double weight = kModelWeight) {
  if (gpu < 0 || gpu >= static_cast<int>(reserve.size())) return 0;
  return weight * reserve[gpu] * milli;
}

// The keep-whole term: breaking a scarce host costs this much (FragmentCache::breaks_scarce_host).
double keep_whole_cost(const ScoreContext& ctx, const model::Node& node,
                       const model::GpuRequest& req, std::span<const int> gpus) {
  if (ctx.fragments == nullptr) return 0;
  return ctx.fragments->breaks_scarce_host(node, req, gpus) ? kKeepWholeCost : 0;
}

// The node's GPUs by what is free on them, counted in the share rule's pass over them.
struct GpuRooms {
  int idle = 0;         // nothing in use
  int partly_used = 0;  // some room left, some in use
  int live_room = 0;    // milli free on GPUs whose room a common share still fits (idle included)
  void count(int room, int live) {
    if (room >= model::kFullComputeMilli) {
      ++idle;
    } else if (room > 0) {
      ++partly_used;
    }
    if (room >= live) live_room += room;
  }
};

// The live GPU room (milli) of a node that its CPU left cannot serve: pods asking GPUs come with
// mix.cpu_per_gpu_milli CPU per GPU milli, so `cpu` milli of CPU serves that much room and no more.
double cpu_stranded_room(const WorkloadMix& mix, double live_room, double cpu) {
  return std::max(0.0, live_room - std::max(0.0, cpu) / mix.cpu_per_gpu_milli);
}

// What a share of `milli` taking a GPU with `room` free adds to the node's CPU-stranded room.
// The share rule otherwise counts only the room next to shares that no later share fits; on the
// share-heavy traces as much again stayed free on nodes whose CPU the shares had used up (at
// arrived = 100 % of gpushare100, seed 42: 1.4 % of the cluster's GPU in live gaps on nodes with
// under 2 cores left), and nothing steered shares away from them while no whole-GPU pods were
// seen (share_cpu_ties needs those). 0 where the node's CPU is not tracked or no mix knows CPU.
double cpu_stranded_added(const WorkloadMix& mix, const model::Node& node,
                          const model::GpuRequest& req, const GpuRooms& rooms, int room, int milli,
                          int live) {
  if (mix.cpu_per_gpu_milli <= 0 || node.host.cpu_milli <= 0) return 0;
  const int left = room - milli;
  const double live_after = rooms.live_room - (room >= live ? room : 0) + (left >= live ? left : 0);
  const double cpu = cpu_left(node);
  return cpu_stranded_room(mix, live_after, cpu - cpu_asked(node, req)) -
         cpu_stranded_room(mix, rooms.live_room, cpu);
}

// The fraction of the GPU demand seen that can use the node's GPUs (its first GPU's model): the
// pods naming no model and those naming this one (WorkloadMix::model_demand, a list's demand
// split evenly over its models). 1 when no pod names a model. Room a share strands for want of
// CPU is lost only to these: on gpuspec33's G2 boxes 0.72, on val-spec's L40S 0.51.
double usable_demand(const WorkloadMix& mix, const model::Node& node) {
  if (mix.model_demand.empty() || node.gpus.empty()) return 1;
  double named = 0, mine = 0;
  for (const auto& [m, demand] : mix.model_demand) {
    named += demand;
    if (model::ascii_iequals(m, node.gpus.front().model)) mine = demand;
  }
  return std::clamp(1 - named + mine, 0.0, 1.0);
}

// Ties among the nodes where a share adds the same waste, broken by CPU. Shares ask CPU too (4
// to 12 cores on the Alibaba trace), and a node whose CPU runs out strands its idle GPUs:
// - a node whose CPU left after the share falls short of what its idle GPUs need (at the mix's
//   CPU per whole GPU) ranks lower, by the cores it falls short;
// - a share opening a fresh GPU goes to the node with the fewest partly used GPUs, so that the
//   CPU of shares spreads over nodes instead of piling up where shares already are. Empty nodes
//   rank first, which costs multi-GPU pods their hosts, so only while they ask little of the
//   demand; and only while whole-GPU pods are seen (a cluster of shares alone has no GPUs to
//   strand, and spreading cost gpushare100 a point). And an empty host ranks first only while
//   the empty hosts are more than the multi-GPU pods need (FragmentCache::empty_hosts_to_spare,
//   from the mix's multi_gpu_demand and the idle GPUs); after that it ranks last. Ranking them
//   first throughout used up gpushare60's empty 8-GPU hosts: its 8-GPU pods waited up to 241 s
//   (dynamic mode as deployed, seeds 42-51, mean of the seeds' longest) where FGD's never wait;
//   with this, none waits. Static, as deployed: gpushare60 8.07 -> 8.02, five more Alibaba traces
//   down by 0.005-0.02, gpushare80 up 0.009, both synthetic halves unchanged but val-infer
//   (+0.006, sd 0.16). Measured against all GPUs instead of the idle ones it spared more hosts
//   and cost cpu250 0.18 (5.14 -> 5.32) and its p99 wait 30 -> 36 s (bench/README.md).
// Tuning half without both ties: tune-infer 2.34, tune-spec 3.59, tune-mem 8.58 against 2.07,
// 3.52, 8.43 (tune-train equal, tune-cpu and tune-modern within 0.04); without the first only:
// 2.12, 3.60, 8.61, tune-cpu 12.30 against 12.19. Kept: it helps there and on Alibaba default.
double share_cpu_ties(const WorkloadMix& mix, const FragmentCache* cache, const model::Node& node,
                      const model::GpuRequest& req, const GpuRooms& rooms, bool opens_fresh) {
  if (mix.cpu_per_whole_gpu <= 0) return 0;
  const int idle_after = rooms.idle - (opens_fresh ? 1 : 0);
  const double cpu_short =
      idle_after * mix.cpu_per_whole_gpu - cpu_left(node) + cpu_asked(node, req);
  double ties = kTieBreak * std::max(0.0, cpu_short) / 1000.0;
  if (opens_fresh && mix.multi_gpu_demand < kSpreadBelowMultiDemand) {
    const auto gpus = static_cast<int>(node.gpus.size());
    const bool empty_host = gpus >= 2 && rooms.idle == gpus;
    const bool spare = cache == nullptr || cache->empty_hosts_to_spare();
    ties += kTieBreak * (empty_host && !spare ? gpus : rooms.partly_used);
  }
  return ties;
}

long long stranding_score(double delta) {
  return static_cast<long long>(1.0 / (1.0 + std::exp(-delta / 1000.0)) * 100);
}

}  // namespace

double GaplessStrategy::score_node_in(const ScoreContext& ctx, const model::Node& node,
                                      const model::GpuRequest& req) const {
  const MixView mix(ctx, req);
  // The driver's cache (every node's stranding, the empty hosts) when built for this mix; without
  // one, stranding is computed on the spot and the empty hosts are taken to be plentiful.
  const FragmentCache* cache = ctx.workload == &*mix ? ctx.fragments : nullptr;
  if (single_share(req)) {
    const int live = live_gap(*mix);
    const int milli = req.shared.compute_milli;
    const std::span<const float> reserve = reserves(ctx, node, req);
    double best = 1 << 20;
    int first = -1, best_room = 0;
    GpuRooms rooms;
    for (const model::Gpu& g : node.gpus) {
      const int room = free_milli(g);
      rooms.count(room, live);
      if (!can_serve_now(g, req)) continue;
      const double w =
          added_waste(room, milli, live) + model_cost(reserve, g.index, milli, kShareModelWeight);
      if (w < best) {
        best = w;
        best_room = room;
      }
      if (first < 0) first = g.index;
    }
    if (first < 0) return 0.0;
    const bool opens_fresh = best_room >= model::kFullComputeMilli;
    // Any GPU of the node breaks it for a multi-GPU shape as well as another.
    const double waste = best +
                         kCpuStrandedWeight * usable_demand(*mix, node) *
                             cpu_stranded_added(*mix, node, req, rooms, best_room, milli, live) +
                         share_cpu_ties(*mix, cache, node, req, rooms, opens_fresh) +
                         keep_whole_cost(ctx, node, req, std::span<const int>(&first, 1));
    return waste_score(waste);
  }
  // Whole GPUs: the lowest free indices, as the GPU-level score below picks them.
  std::vector<int> gpus;
  if (req.kind != model::RequestKind::kNone) {
    for (const model::Gpu& g : node.gpus) {
      if (static_cast<int>(gpus.size()) < req.units() && can_serve_now(g, req)) {
        gpus.push_back(g.index);
      }
    }
  }
  double delta = cache ? cache->stranding(node) - cache->stranding_after(node, req, gpus)
                       : node_stranding(node, *mix) - node_stranding_after(node, *mix, req, gpus);
  const int milli = milli_per_gpu(node, req);
  const std::span<const float> reserve = reserves(ctx, node, req);
  for (int g : gpus) delta -= model_cost(reserve, g, milli);
  delta -= keep_whole_cost(ctx, node, req, gpus);
  return hundredths(stranding_score(delta));
}

double GaplessStrategy::score_gpu_in(const ScoreContext& ctx, const model::Node& node,
                                     const model::Gpu& gpu, const model::GpuRequest& req) const {
  if (!single_share(req)) return tightest_gpu(node, gpu, req);
  const MixView mix(ctx, req);
  const int milli = req.shared.compute_milli;
  return waste_score(added_waste(free_milli(gpu), milli, live_gap(*mix)) +
                     model_cost(reserves(ctx, node, req), gpu.index, milli, kShareModelWeight));
}

double GaplessStrategy::score_node(const model::Node& node, const model::GpuRequest& req) const {
  return score_node_in(ScoreContext{}, node, req);
}

double GaplessStrategy::score_gpu(const model::Node& node, const model::Gpu& gpu,
                                  const model::GpuRequest& req) const {
  return score_gpu_in(ScoreContext{}, node, gpu, req);
}

}  // namespace gapless::placement
