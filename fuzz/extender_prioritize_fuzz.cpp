// The extender's prioritize verb on arbitrary request bodies (ExtenderArgs from kube-scheduler):
// never throws, always answers JSON, never changes the model. Seeds: tests/fixtures/extender.
#include <cstddef>
#include <cstdint>

#include "extender_fixture.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static gapless::fuzz::ExtenderFixture fixture;  // shared: prioritize must not change it
  gapless::fuzz::run_verb(fixture, gapless::fuzz::Verb::kPrioritize,
                          gapless::fuzz::as_text(data, size));
  return 0;
}
