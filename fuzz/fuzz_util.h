// Helpers shared by the fuzz targets (fuzz/*_fuzz.cpp). Each target defines
// LLVMFuzzerTestOneInput; it is linked either with libFuzzer (GAPLESS_FUZZ builds, clang) or with
// replay_main.cpp, which feeds it the committed corpus and regressions as a ctest.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

namespace gapless::fuzz {

inline std::string_view as_text(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// An invariant of the code under test: a violation aborts, which libFuzzer (and the replay
// ctest) report as a crash with the input that caused it.
[[noreturn]] inline void violated(const char* what, std::string_view detail = {}) {
  std::fprintf(stderr, "fuzz invariant violated: %s\n", what);
  if (!detail.empty()) {
    std::fprintf(stderr, "  %.*s\n", static_cast<int>(std::min<std::size_t>(detail.size(), 2000)),
                 detail.data());
  }
  std::abort();
}

inline void check(bool ok, const char* what, std::string_view detail = {}) {
  if (!ok) violated(what, detail);
}

}  // namespace gapless::fuzz
