// The watch-stream splitter (k8s::JsonStreamSplitter). Splitting must not depend on where the
// chunks of the stream end: feeding the bytes at once and in chunks gives the same values. The
// first byte of the input picks the chunk sizes; the rest is the stream.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_util.h"
#include "gapless/k8s/json_stream.h"

namespace {

std::vector<std::string> split(std::string_view stream, std::size_t chunk, std::size_t growth) {
  gapless::k8s::JsonStreamSplitter splitter;
  std::vector<std::string> values;
  auto collect = [&](std::string_view v) {
    values.emplace_back(v);
    return true;
  };
  while (!stream.empty()) {
    const std::size_t n = std::min(chunk, stream.size());
    gapless::fuzz::check(splitter.feed(stream.substr(0, n), collect), "feed stopped on its own");
    stream.remove_prefix(n);
    chunk += growth;
  }
  gapless::fuzz::check(splitter.finish(collect), "finish stopped on its own");
  return values;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::size_t chunk = 1 + (data[0] & 0x0f), growth = data[0] >> 4;
  const std::string_view stream = gapless::fuzz::as_text(data + 1, size - 1);
  const std::vector<std::string> whole = split(stream, stream.size() + 1, 0);
  const std::vector<std::string> chunked = split(stream, chunk, growth);
  gapless::fuzz::check(whole == chunked, "values depend on chunk boundaries");
  std::size_t at = 0;  // each value is the next piece of the stream
  for (const std::string& v : whole) {
    at = v.empty() ? std::string_view::npos : stream.find(v, at);
    gapless::fuzz::check(at != std::string_view::npos, "a value that is not a piece of the stream",
                         v);
    at += v.size();
  }
  return 0;
}
