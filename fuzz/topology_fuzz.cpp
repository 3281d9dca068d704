// The gapless.io/gpu-topology annotation alone (k8s::node_from_topology_annotation), as the raw
// annotation string. A topology that parses must be one the model can hold (node_checks.h).
#include <cstddef>
#include <cstdint>

#include "fuzz_util.h"
#include "gapless/k8s/node_inventory.h"
#include "node_checks.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto parsed =
      gapless::k8s::node_from_topology_annotation("fuzz-node", gapless::fuzz::as_text(data, size));
  if (!parsed) {
    gapless::fuzz::check(!parsed.error().empty(), "topology failed without a message");
    return 0;
  }
  gapless::fuzz::check(parsed->name == "fuzz-node", "topology node lost its name");
  gapless::fuzz::check_node(*parsed);
  return 0;
}
