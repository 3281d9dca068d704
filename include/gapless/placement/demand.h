// Shared vocabulary of feasibility, choice and strategies: which GPUs may serve a request, and
// how much of a node a request takes.
#pragma once

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

}  // namespace gapless::placement
