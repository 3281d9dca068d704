// The extender's filter verb on arbitrary request bodies (ExtenderArgs from kube-scheduler):
// never throws, always answers JSON, never changes the model. Seeds: tests/fixtures/extender.
// Also: a body the fast reader (simdjson On Demand, which checks but does not unescape the
// strings it does not use) takes is valid JSON to nlohmann too, and each full-node item it
// hands back is JSON named as it says.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>

#include "../src/server/args_reader.h"
#include "extender_fixture.h"
#include "fuzz_util.h"

namespace {

void check_fast_reader(std::string_view body) {
  using gapless::fuzz::check;
  const auto read = gapless::server::wire::read_extender_args(body);
  if (!read) return;
  check(nlohmann::json::accept(body), "the fast reader took invalid JSON", std::string(body));
  if (!read->full_mode) return;
  for (std::size_t i = 0; i < read->names.size(); ++i) {
    const auto item = nlohmann::json::parse(read->item_json(i), nullptr, false);
    check(item.is_object(), "a full-node item came back as no JSON object", std::string(body));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static gapless::fuzz::ExtenderFixture fixture;  // shared: filter must not change it
  const std::string_view body = gapless::fuzz::as_text(data, size);
  gapless::fuzz::run_verb(fixture, gapless::fuzz::Verb::kFilter, body);
  check_fast_reader(body);
  return 0;
}
