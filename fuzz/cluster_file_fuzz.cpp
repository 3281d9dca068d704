// --cluster files (k8s::parse_cluster_file): JSON or YAML Lists of Nodes and bound Pods. Every
// node of a parsed cluster must be one the model can hold (node_checks.h), and every allocation
// restored from a record must sit on a node of the cluster.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_util.h"
#include "gapless/k8s/cluster_file.h"
#include "node_checks.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using gapless::fuzz::check;
  const std::string text(gapless::fuzz::as_text(data, size));
  auto file = gapless::k8s::parse_cluster_file(text, "fuzz.yaml");
  if (!file) {
    check(file.error().starts_with("fuzz.yaml: "), "a cluster file error without its source",
          file.error());
    return 0;
  }
  for (const gapless::model::Node* node : file->cluster.nodes()) gapless::fuzz::check_node(*node);
  for (const gapless::model::Allocation* a : file->cluster.allocations()) {
    check(file->cluster.find_node(a->node) != nullptr, "an allocation on an unknown node", a->node);
  }
  return 0;
}
