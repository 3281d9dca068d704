// Splits a byte stream into its top-level JSON values, as a Kubernetes watch stream needs: the
// API server writes one event object after another, and neither chunk nor line boundaries are
// guaranteed to fall between them (extender-protocol.md §4.4).
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

namespace gapless::k8s {

// Finds where each top-level value ends by tracking strings (with escapes) and the nesting depth
// of objects and arrays; it does not validate the JSON, the caller parses each value.
// Whitespace between values is skipped. A top-level scalar (number, true, null, ...) ends at
// whitespace or at the first character of the next object, array or string.
//
// Not thread-safe: one splitter per stream.
class JsonStreamSplitter {
 public:
  using OnValue = std::function<bool(std::string_view value)>;

  // Feeds the next bytes of the stream. Calls on_value for each value completed by them, in
  // order; the view is valid only during the call. Returns false as soon as on_value returns
  // false (the rest of `data` is then dropped).
  bool feed(std::string_view data, const OnValue& on_value);

  // At the end of the stream: hands over a top-level scalar that was still open (a value is
  // only known to end at the next byte). Returns on_value's answer, or true if none was open.
  bool finish(const OnValue& on_value);

  // Bytes of the unfinished value held back; 0 between values.
  std::size_t pending() const { return value_.size(); }

 private:
  enum class State { kBetween, kContainer, kString, kScalar };
  State state_ = State::kBetween;
  int depth_ = 0;           // open objects and arrays in a container value
  bool in_string_ = false;  // inside a string within a container value
  bool escaped_ = false;    // the previous byte in a string was an unescaped backslash
  std::string value_;       // bytes of the unfinished value from earlier feeds
};

}  // namespace gapless::k8s
