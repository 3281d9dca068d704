// The gapless.io/allocation record (k8s::decode_allocation_record). A record that decodes must
// survive a round trip: encode(decode(x)) decodes to the same allocation.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_util.h"
#include "gapless/k8s/allocation_record.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using gapless::fuzz::check;
  auto a = gapless::k8s::decode_allocation_record(gapless::fuzz::as_text(data, size), "ns", "pod",
                                                  "uid");
  if (!a) {
    check(!a.error().empty(), "decode failed without a message");
    return 0;
  }
  check(!a->node.empty() && (a->gpus.empty() != a->mig.empty()), "decoded an inconsistent record");
  for (const auto& g : a->gpus) {
    check(g.index >= 0 && g.memory_mib >= 0 && g.compute_milli >= 0 && g.gpushare_units >= 0,
          "decoded a negative grant");
  }
  const std::string text = gapless::k8s::encode_allocation_record(*a);
  auto again = gapless::k8s::decode_allocation_record(text, "ns", "pod", "uid");
  check(again.ok(), "an encoded record does not decode", again.ok() ? text : again.error());
  check(*again == *a, "a record changed in an encode/decode round trip", text);
  return 0;
}
