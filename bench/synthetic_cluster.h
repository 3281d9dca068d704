// Generated clusters for benchmarks: a deterministic mixed fleet of 8-GPU nodes (HGX H100
// NVSwitch, DGX-1 V100 cube-mesh, A100-80GB with reconfigurable MIG, T4-class PCIe), partly
// filled by placing random pods through the engine.
#pragma once

#include <cstdint>

#include <utility>
#include <vector>

#include "gapless/model/cluster.h"
#include "gapless/model/request.h"

namespace gapless::bench {

// `nodes` nodes named node-00000...; about `fill` of the whole-GPU capacity is then taken by
// pods of pod_stream's workload (whole GPUs, shares, MIG; 4 CPUs and 16 GiB each) placed with
// the built-in policy on random nodes. Same seed => same cluster.
// `bound`, when given, receives those pods: a live extender learns its workload mix from the
// bound pods it finds at start-up (informer, --cluster file), and a benchmark should too.
using BoundPod = std::pair<model::PodInfo, model::GpuRequest>;
model::Cluster synthetic_cluster(int nodes, double fill, std::uint32_t seed,
                                 std::vector<BoundPod>* bound = nullptr);

}  // namespace gapless::bench
