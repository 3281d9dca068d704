// Node objects (k8s::node_from_json: topology annotation, GFD labels, gpushare capacity) from
// JSON bytes. A node that parses must be one the model can hold (node_checks.h).
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>

#include "fuzz_util.h"
#include "gapless/k8s/node_inventory.h"
#include "node_checks.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const nlohmann::json node = nlohmann::json::parse(gapless::fuzz::as_text(data, size), nullptr,
                                                    /*allow_exceptions=*/false);
  if (node.is_discarded()) return 0;
  auto parsed = gapless::k8s::node_from_json(node);
  if (!parsed) {
    gapless::fuzz::check(!parsed.error().empty(), "node_from_json failed without a message");
    return 0;
  }
  gapless::fuzz::check_node(*parsed);
  return 0;
}
