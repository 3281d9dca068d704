// Which nodes the pairing gate (docs/node-pairing.md) holds binds for. Private to the server.
#pragma once

#include <string>

#include "gapless/placement/scheduler.h"

namespace gapless::server {

// Whether Gapless's device plugin allocates on `node` as its Node shows it now
// (model::Node::gapless_device_plugin: the agent's gapless.io/device-plugin annotation, backed
// by the kubelet's allocatable): only there does an Allocate get paired with its pod and the pod
// marked gapless.io/allocated. Elsewhere (NVIDIA's plugin allocates, the agent's plugin is off
// or gone, GFD or gpushare nodes) nothing would ever mark a pod, so gating would hold every bind
// alike until the pod starts, or until --pairing-wait where it never does (fake nodes). Read at
// every bind, so a node that changes is re-decided at once. False for a node the model lacks.
bool runs_gapless_plugin(const placement::Scheduler& scheduler, const std::string& node);

}  // namespace gapless::server
