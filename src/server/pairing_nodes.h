// Which nodes the pairing gate (docs/node-pairing.md) holds binds for. Private to the server.
#pragma once

#include <string>

#include "gapless/placement/scheduler.h"

namespace gapless::server {

// Whether `node` is known from gapless-agent's gapless.io/gpu-topology annotation: only there
// does Gapless's device plugin pair an Allocate with its pod. On a node known from GFD labels or
// gpushare capacity another plugin allocates and nothing ever marks a pod gapless.io/allocated,
// so gating it would hold every bind alike until the pod starts, or until --pairing-timeout
// where the pod never starts. False for a node the model does not have.
bool runs_gapless_plugin(const placement::Scheduler& scheduler, const std::string& node);

}  // namespace gapless::server
