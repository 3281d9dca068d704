// JSON views of a model node shared by the server's read-only routes (/debug/state, the GPU
// map). Private to the server. Pure functions; thread-safe.
#pragma once

#include <nlohmann/json.hpp>

#include "gapless/model/node.h"

namespace gapless::server {

// The node's NVLink islands: GPU indices connected by working NVLinks, directly or through
// other GPUs, as lists (ascending); GPUs without NVLink are left out.
nlohmann::json nvlink_islands(const model::Node& n);

}  // namespace gapless::server
