// The built-in strategies (one .cpp each) and the measures they share. Private to placement.
#pragma once

#include "gapless/placement/strategy.h"

namespace gapless::placement {

// Node fill in [0, 1] after placing `req`: (GPUs' worth in use + demand) / healthy GPUs.
double node_fill_after(const model::Node& node, const model::GpuRequest& req);
// GPU fill in [0, 1] after placing one unit of `req` on it.
double gpu_fill_after(const model::Gpu& gpu, const model::GpuRequest& req);
// Best fit for a vRAM + compute share in both dimensions: 3/4 of the less full dimension after
// placing it plus 1/4 of the fuller one. A GPU whose vRAM runs out while half its compute is left
// (or the reverse) strands the rest, so GPUs that fill evenly win, and fuller ones among those.
// Shares that bound only one dimension get gpu_fill_after.
double balanced_fill_after(const model::Gpu& gpu, const model::GpuRequest& req);
// Best fit inside a node, the GPU choice of the FGD paper's baselines: a share goes to the GPU
// with the least left that still fits it (1 - what is left after / 1000); whole GPUs all score 1,
// so the lowest free indices win.
double tightest_gpu(const model::Node& node, const model::Gpu& gpu, const model::GpuRequest& req);
// A score on the FGD simulator's integer 0..100 scale, as [0, 1]: the truncation matters, because
// equal scores fall back to node order.
inline double hundredths(long long score) {
  return static_cast<double>(score) / 100.0;
}
// The simulator's normalisers: the largest node has 128 cores and 8 GPUs.
inline constexpr double kMaxSpecCpuMilli = 128000;
inline constexpr double kMaxSpecGpuMilli = 8000;
// Free CPU of a node that tracks it, else 0 (the CPU terms then drop out).
inline double cpu_left(const model::Node& node) {
  return node.host.cpu_milli > 0
             ? static_cast<double>(node.host.cpu_milli - node.host_used.cpu_milli)
             : 0.0;
}
// CPU the request asks of a node that tracks it, else 0.
inline double cpu_asked(const model::Node& node, const model::GpuRequest& req) {
  return node.host.cpu_milli > 0 ? static_cast<double>(req.host.cpu_milli) : 0.0;
}

// Fraction of the GPU's peers that are busy. Peers: its NVLink neighbours if it has any, else the
// GPUs on its NUMA node, else every other GPU of the node.
double busy_peer_fraction(const model::Node& node, const model::Gpu& gpu);

class BundleStrategy final : public Strategy {
 public:
  std::string_view name() const override { return "bundle"; }
  std::string_view description() const override {
    return "pack: fullest node, fullest GPU that fits";
  }
  double score_node(const model::Node& node, const model::GpuRequest& req) const override;
  double score_gpu(const model::Node& node, const model::Gpu& gpu,
                   const model::GpuRequest& req) const override;
};

class SpreadStrategy final : public Strategy {
 public:
  std::string_view name() const override { return "spread"; }
  std::string_view description() const override { return "balance: emptiest node, emptiest GPU"; }
  double score_node(const model::Node& node, const model::GpuRequest& req) const override;
  double score_gpu(const model::Node& node, const model::Gpu& gpu,
                   const model::GpuRequest& req) const override;
};

// The baselines of the FGD paper (docs/packing-benchmark.md §4), scored as its simulator scores
// them, on the integer 0..100 scale.

class RandomStrategy final : public Strategy {
 public:
  std::string_view name() const override { return "random"; }
  std::string_view description() const override {
    return "a uniformly random node and shared GPU, drawn per pod (ScoreContext::draw)";
  }
  double score_node(const model::Node& node, const model::GpuRequest& req) const override;
  double score_gpu(const model::Node& node, const model::Gpu& gpu,
                   const model::GpuRequest& req) const override;
  double score_node_in(const ScoreContext& ctx, const model::Node& node,
                       const model::GpuRequest& req) const override;
  double score_gpu_in(const ScoreContext& ctx, const model::Node& node, const model::Gpu& gpu,
                      const model::GpuRequest& req) const override;
  bool uses_draw() const override { return true; }
};

class DotProductStrategy final : public Strategy {
 public:
  std::string_view name() const override { return "dotprod"; }
  std::string_view description() const override {
    return "Tetris: smallest dot product of free (CPU, GPU) and request; best-fit GPU";
  }
  double score_node(const model::Node& node, const model::GpuRequest& req) const override;
  double score_gpu(const model::Node& node, const model::Gpu& gpu,
                   const model::GpuRequest& req) const override;
};

class GpuClusteringStrategy final : public Strategy {
 public:
  std::string_view name() const override { return "clustering"; }
  std::string_view description() const override {
    return "group pods of the same GPU count on a node, fuller first; best-fit GPU";
  }
  double score_node(const model::Node& node, const model::GpuRequest& req) const override;
  double score_gpu(const model::Node& node, const model::Gpu& gpu,
                   const model::GpuRequest& req) const override;
};

class GpuPackingStrategy final : public Strategy {
 public:
  std::string_view name() const override { return "packing"; }
  std::string_view description() const override {
    return "share a used GPU, else free GPUs of a used node, else the smallest empty node";
  }
  double score_node(const model::Node& node, const model::GpuRequest& req) const override;
  double score_gpu(const model::Node& node, const model::Gpu& gpu,
                   const model::GpuRequest& req) const override;
};

class BestFitStrategy final : public Strategy {
 public:
  std::string_view name() const override { return "bestfit"; }
  std::string_view description() const override {
    return "least CPU and GPU left over after the pod; best-fit GPU";
  }
  double score_node(const model::Node& node, const model::GpuRequest& req) const override;
  double score_gpu(const model::Node& node, const model::Gpu& gpu,
                   const model::GpuRequest& req) const override;
};

class FgdStrategy final : public Strategy {
 public:
  std::string_view name() const override { return "fgd"; }
  std::string_view description() const override {
    return "fragmentation gradient descent: least growth of expected GPU fragmentation";
  }
  double score_node(const model::Node& node, const model::GpuRequest& req) const override;
  double score_gpu(const model::Node& node, const model::Gpu& gpu,
                   const model::GpuRequest& req) const override;
  double score_node_in(const ScoreContext& ctx, const model::Node& node,
                       const model::GpuRequest& req) const override;
  double score_gpu_in(const ScoreContext& ctx, const model::Node& node, const model::Gpu& gpu,
                      const model::GpuRequest& req) const override;
};

// Gapless's own: dead-room-aware share placement and stranding-aware whole-GPU placement under
// the workload mix learned online (gapless.cpp).
class GaplessStrategy final : public Strategy {
 public:
  std::string_view name() const override { return "gapless"; }
  std::string_view description() const override {
    return "shares where they leave the least dead room, whole GPUs where the least is stranded";
  }
  double score_node(const model::Node& node, const model::GpuRequest& req) const override;
  double score_gpu(const model::Node& node, const model::Gpu& gpu,
                   const model::GpuRequest& req) const override;
  double score_node_in(const ScoreContext& ctx, const model::Node& node,
                       const model::GpuRequest& req) const override;
  double score_gpu_in(const ScoreContext& ctx, const model::Node& node, const model::Gpu& gpu,
                      const model::GpuRequest& req) const override;
};

}  // namespace gapless::placement
