// A realistic stream of GPU pods for the latency benchmark, as kube-scheduler would send them:
// Pod JSON (so the extender parses exactly what it would in a cluster) and, for full-node
// mode, Node JSON carrying the gapless.io/gpu-topology annotation.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gapless/model/node.h"

namespace gapless::bench {

struct StreamPod {
  std::string name;    // also the UID, prefixed
  std::string shape;   // e.g. "whole-2", "shared-8g", "mig-3g.40gb"
  nlohmann::json pod;  // a v1 Pod, pending
};

// `count` pods: whole 1/2/4/8 GPUs (60 %), shared vRAM+compute (25 %), MIG 1g/2g/3g (15 %).
// Same seed => same stream.
std::vector<StreamPod> pod_stream(int count, std::uint32_t seed);

// A v1 Node object for `node`, with its GPUs and links in the topology annotation and the
// labels a GPU node typically carries (what kube-scheduler sends in full-node mode).
nlohmann::json node_object(const model::Node& node);

}  // namespace gapless::bench
