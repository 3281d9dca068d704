// Shared vocabulary of feasibility, choice and strategies: which GPUs may serve a request, and
// how much of a node a request takes.
#pragma once

#include <cstdint>

#include "gapless/model/node.h"
#include "gapless/model/request.h"

namespace gapless::placement {

bool model_in_list(const model::Gpu& gpu, const model::GpuRequest& req);

// The request's model list allows this GPU (empty list: any). Case-insensitive exact match.
// Inline: called for every GPU of every candidate node.
inline bool model_allowed(const model::Gpu& gpu, const model::GpuRequest& req) {
  return req.models.empty() || model_in_list(gpu, req);
}

// Could this GPU ever serve the request (ignoring what is in use)?
bool can_serve(const model::Gpu& gpu, const model::GpuRequest& req);
// Can it serve one unit of the request right now? (For MIG: see mig_choice, not this.)
bool can_serve_now(const model::Gpu& gpu, const model::GpuRequest& req);

// How many GPUs' worth of capacity the request takes on this node (a 4-of-7 MIG slice is 4/7).
double demand_in_gpus(const model::Node& node, const model::GpuRequest& req);

// Fill of a GPU in [0, 1] across every dimension in use (max of vRAM, compute, MIG compute...).
double gpu_fill(const model::Gpu& gpu);

// What is left of a GPU in milli-GPU, 0..1000: 1000 * (1 - gpu_fill), 0 for an unhealthy GPU.
// Exact for compute-only shares (the trace bench's case).
int free_milli(const model::Gpu& gpu);
// Sum of free_milli over the node's GPUs.
int free_milli(const model::Node& node);
// Milli-GPU the request takes on each GPU it lands on (1000 for a whole GPU, the compute or
// vRAM fraction for a share, whichever is larger); 0 for a request without GPUs.
int milli_per_gpu(const model::Node& node, const model::GpuRequest& req);
// Free CPU on a node; REQUIRES: node.host.cpu_milli > 0 (tracked).
inline std::int64_t free_cpu_milli(const model::Node& node) {
  return node.host.cpu_milli - node.host_used.cpu_milli;
}

}  // namespace gapless::placement
