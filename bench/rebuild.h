// How long the extender takes to rebuild its model after a restart: the informers' initial lists
// (a NodeList with gapless.io/gpu-topology annotations, a PodList whose bound GPU pods carry
// gapless.io/allocation records) parsed and applied through k8s::ClusterSync into a fresh
// placement::Scheduler, exactly what the extender's informer handlers do. HTTP transfer of the
// lists is not included.
#pragma once

#include <cstddef>

namespace gapless::bench {

struct RebuildRun {
  int nodes = 0;
  std::size_t pods = 0;        // objects in the PodList
  std::size_t list_bytes = 0;  // NodeList + PodList JSON
  double parse_s = 0;          // JSON text -> objects
  double apply_s = 0;          // ClusterSync: nodes, then pods, into the model
  double relist_s = 0;         // the node list applied again over the pods (a node relist)
  std::size_t restored = 0;    // GPU allocations rebuilt exactly as the source held them
  std::size_t expected = 0;    // GPU allocations in the cluster the lists were written from
};

// A synthetic cluster of `nodes` 8-GPU nodes, half full, plus CPU-only pods so that the PodList
// holds `pods_per_node` pods per node.
RebuildRun run_rebuild(int nodes, int pods_per_node);

}  // namespace gapless::bench
