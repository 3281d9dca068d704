// The extender's bind verb on arbitrary request bodies (ExtenderBindingArgs): never throws,
// always answers JSON, changes the model only when it succeeds. Each input gets a fresh model,
// so a bind that succeeds does not leak into the next input. The fixture's pending pods
// (extender_fixture.h, kPendingUids) are the ones a bind can succeed for.
#include <cstddef>
#include <cstdint>

#include "extender_fixture.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  gapless::fuzz::ExtenderFixture fixture;
  gapless::fuzz::run_verb(fixture, gapless::fuzz::Verb::kBind, gapless::fuzz::as_text(data, size));
  return 0;
}
