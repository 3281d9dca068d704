#include "gapless/k8s/json_stream.h"

namespace gapless::k8s {

namespace {

bool is_space(char c) {
  return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

// A byte that cannot be part of a top-level scalar: it starts the next value.
bool ends_scalar(char c) {
  return is_space(c) || c == '{' || c == '[' || c == '"';
}

}  // namespace

bool JsonStreamSplitter::feed(std::string_view data, const OnValue& on_value) {
  std::size_t begin = 0;  // where the current value's bytes start in `data`
  // The current value ends just before data[end]; hands it over with what earlier feeds held.
  auto emit = [&](std::size_t end) {
    state_ = State::kBetween;
    if (value_.empty()) return on_value(data.substr(begin, end - begin));
    value_.append(data.substr(begin, end - begin));
    const bool go_on = on_value(value_);
    value_.clear();
    return go_on;
  };
  auto start = [&](char c, std::size_t at) {
    begin = at;
    escaped_ = false;
    in_string_ = false;
    if (c == '{' || c == '[') {
      state_ = State::kContainer;
      depth_ = 1;
    } else if (c == '"') {
      state_ = State::kString;
    } else {
      state_ = State::kScalar;
    }
  };

  for (std::size_t i = 0; i < data.size(); ++i) {
    const char c = data[i];
    switch (state_) {
      case State::kBetween:
        if (!is_space(c)) start(c, i);
        break;
      case State::kContainer:
        if (in_string_) {
          if (escaped_) {
            escaped_ = false;
          } else if (c == '\\') {
            escaped_ = true;
          } else if (c == '"') {
            in_string_ = false;
          }
        } else if (c == '"') {
          in_string_ = true;
        } else if (c == '{' || c == '[') {
          ++depth_;
        } else if ((c == '}' || c == ']') && --depth_ == 0) {
          if (!emit(i + 1)) return false;
        }
        break;
      case State::kString:
        if (escaped_) {
          escaped_ = false;
        } else if (c == '\\') {
          escaped_ = true;
        } else if (c == '"') {
          if (!emit(i + 1)) return false;
        }
        break;
      case State::kScalar:
        if (ends_scalar(c)) {
          if (!emit(i)) return false;
          if (!is_space(c)) start(c, i);
        }
        break;
    }
  }
  if (state_ != State::kBetween) value_.append(data.substr(begin));
  return true;
}

bool JsonStreamSplitter::finish(const OnValue& on_value) {
  if (state_ != State::kScalar) return true;
  state_ = State::kBetween;
  const std::string value = std::move(value_);
  value_.clear();
  return on_value(value);
}

}  // namespace gapless::k8s
