// The built-in strategies (one .cpp each) and the measures they share. Private to placement.
#pragma once

#include "gapless/placement/strategy.h"

namespace gapless::placement {

// Node fill in [0, 1] after placing `req`: (GPUs' worth in use + demand) / healthy GPUs.
double node_fill_after(const model::Node& node, const model::GpuRequest& req);
// GPU fill in [0, 1] after placing one unit of `req` on it.
double gpu_fill_after(const model::Gpu& gpu, const model::GpuRequest& req);
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

}  // namespace gapless::placement
