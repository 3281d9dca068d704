// The extender's preempt verb on arbitrary request bodies (ExtenderPreemptionArgs; the seeds name
// the fixture's bound and stranded pods as victims): never throws, always answers JSON, never
// changes the model. Seeds: tests/fixtures/extender/preempt-args.json and variants.
#include <cstddef>
#include <cstdint>

#include "extender_fixture.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static gapless::fuzz::ExtenderFixture fixture;  // shared: preempt must not change it
  gapless::fuzz::run_verb(fixture, gapless::fuzz::Verb::kPreempt,
                          gapless::fuzz::as_text(data, size));
  return 0;
}
