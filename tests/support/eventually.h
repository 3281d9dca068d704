// Polling for conditions another thread makes true: a test waits on what it can observe, never on
// a count of requests that a server records before it has applied them.
#pragma once

#include <chrono>
#include <functional>
#include <thread>

namespace gapless::test {

// Polls `pred` until it holds or `timeout` passes; returns its last value. The default bound is
// generous: sanitizer builds on a loaded 2-core machine are slow, and a passing test never waits
// it out.
inline bool eventually(const std::function<bool()>& pred,
                       std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline) return pred();
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

}  // namespace gapless::test
