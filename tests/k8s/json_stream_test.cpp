#include "gapless/k8s/json_stream.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>
#include "test_paths.h"

using gapless::k8s::JsonStreamSplitter;
using nlohmann::json;

namespace {

std::string watch_fixture() {
  return gapless::test::fixture_text("extender/watch-events-nodes.jsonl");
}

// Feeds `chunks` one after another and collects the values.
std::vector<std::string> split(const std::vector<std::string>& chunks, bool finish = true) {
  JsonStreamSplitter splitter;
  std::vector<std::string> out;
  auto collect = [&](std::string_view v) {
    out.emplace_back(v);
    return true;
  };
  for (const auto& c : chunks) REQUIRE(splitter.feed(c, collect));
  if (finish) REQUIRE(splitter.finish(collect));
  return out;
}

}  // namespace

TEST_CASE(
    "json stream: the watch fixture split at every byte position gives the same five events") {
  const std::string text = watch_fixture();
  const std::vector<std::string> whole = split({text});
  REQUIRE(whole.size() == 5);
  const std::vector<std::string> types = {"ADDED", "MODIFIED", "BOOKMARK", "DELETED", "ERROR"};
  for (std::size_t i = 0; i < whole.size(); ++i) {
    const json e = json::parse(whole[i]);
    CHECK(e["type"] == types[i]);
  }
  CHECK(json::parse(whole[4])["object"]["code"] == 410);

  for (std::size_t at = 0; at <= text.size(); ++at) {
    const auto parts = split({text.substr(0, at), text.substr(at)});
    if (parts != whole) FAIL("split at byte " << at << " differs");
  }
}

TEST_CASE("json stream: one byte at a time, and three-way splits") {
  const std::string text = watch_fixture();
  const std::vector<std::string> whole = split({text});
  std::vector<std::string> bytes;
  for (char c : text) bytes.emplace_back(1, c);
  CHECK(split(bytes) == whole);
  for (std::size_t a = 0; a < text.size(); a += 97) {
    for (std::size_t b = a; b < text.size(); b += 331) {
      CHECK(split({text.substr(0, a), text.substr(a, b - a), text.substr(b)}) == whole);
    }
  }
}

TEST_CASE("json stream: values need no newline between them, and whitespace is skipped") {
  CHECK(split({R"({"a":1}{"b":2}  [3,[4]]	"s")"}) ==
        std::vector<std::string>{R"({"a":1})", R"({"b":2})", "[3,[4]]", R"("s")"});
  CHECK(split({"\r\n\n  {}\n\n"}) == std::vector<std::string>{"{}"});
  CHECK(split({"", "   ", ""}).empty());
}

TEST_CASE("json stream: braces, quotes and backslashes inside strings do not count") {
  const std::string tricky = R"({"m":"a } ] { [ \" still \\","n":"\\\\","o":"\\\"}"}{"next":true})";
  const auto parts = split({tricky});
  REQUIRE(parts.size() == 2);
  CHECK(json::parse(parts[0])["m"] == "a } ] { [ \" still \\");
  CHECK(json::parse(parts[0])["o"] == "\\\"}");
  CHECK(parts[1] == R"({"next":true})");
  // Split right after each backslash: the escape state must survive the boundary.
  for (std::size_t at = 0; at <= tricky.size(); ++at) {
    CHECK(split({tricky.substr(0, at), tricky.substr(at)}) == parts);
  }
  // A top-level string with an escaped quote.
  CHECK(split({R"("a\"b" "c")"}) == std::vector<std::string>{R"("a\"b")", R"("c")"});
}

TEST_CASE("json stream: top-level scalars end at whitespace, the next value or finish()") {
  CHECK(split({"1 2\ntrue", "{\"a\":null}null"}) ==
        std::vector<std::string>{"1", "2", "true", "{\"a\":null}", "null"});
  CHECK(split({"12", "34 5"}) == std::vector<std::string>{"1234", "5"});
  // Without finish() a scalar at the very end stays pending (it might go on).
  JsonStreamSplitter s;
  std::vector<std::string> out;
  auto collect = [&](std::string_view v) {
    out.emplace_back(v);
    return true;
  };
  REQUIRE(s.feed("42", collect));
  CHECK(out.empty());
  CHECK(s.pending() == 2);
  REQUIRE(s.finish(collect));
  CHECK(out == std::vector<std::string>{"42"});
  CHECK(s.pending() == 0);
}

TEST_CASE("json stream: an unfinished value is held back and reported by pending()") {
  JsonStreamSplitter s;
  int values = 0;
  auto count = [&](std::string_view) {
    ++values;
    return true;
  };
  const std::string head = R"({"type":"ADDED","object":{"kind":"No)";
  REQUIRE(s.feed(head, count));
  CHECK(values == 0);
  CHECK(s.pending() == head.size());
  REQUIRE(s.feed(R"(de"}})", count));
  CHECK(values == 1);
  CHECK(s.pending() == 0);
  // A truncated stream: finish() hands over nothing.
  REQUIRE(s.feed(R"({"cut":)", count));
  REQUIRE(s.finish(count));
  CHECK(values == 1);
}

TEST_CASE("json stream: feed stops when the callback says so") {
  JsonStreamSplitter s;
  std::vector<std::string> out;
  CHECK_FALSE(s.feed("{}[1]{\"x\":2}", [&](std::string_view v) {
    out.emplace_back(v);
    return out.size() < 2;
  }));
  CHECK(out == std::vector<std::string>{"{}", "[1]"});
}

TEST_CASE("json stream: garbage is split, not judged (the parser rejects it later)") {
  const auto parts = split({"}{\"a\":1} ]"});
  REQUIRE(parts.size() == 3);
  CHECK(parts[0] == "}");
  CHECK(parts[1] == R"({"a":1})");
  CHECK(parts[2] == "]");
  CHECK(json::parse(parts[0], nullptr, false).is_discarded());
}
