// The static inventory given with --cluster: a Kubernetes NodeList, optionally followed by a
// PodList of already-bound pods, as JSON or YAML (a single List with Node and Pod items, or
// several YAML documents). Used for demos, tests and benches instead of a live API server.
#pragma once

#include <string>
#include <vector>

#include "gapless/k8s/pod_request.h"
#include "gapless/model/cluster.h"
#include "gapless/model/result.h"

namespace gapless::k8s {

struct ClusterFile {
  model::Cluster cluster;
  // The file's bound, unfinished pods that could be read, in file order (UIDs filled in), for
  // the driver to learn the workload mix from.
  std::vector<ParsedPod> pods;
  std::vector<std::string> warnings;  // e.g. a bound pod without a record, ignored
};

// Nodes become the model; bound pods with a gapless.io/allocation record are restored onto it.
// A record that cannot be decoded or applied fences its node (warning names the pod).
Result<ClusterFile> parse_cluster_file(const std::string& text, const std::string& source_name);
Result<ClusterFile> load_cluster_file(const std::string& path);

}  // namespace gapless::k8s
