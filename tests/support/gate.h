// A gate for server tests that need workers held busy: handlers call pass() and block until the
// test calls open(); entered() counts who arrived.
#pragma once

#include <condition_variable>
#include <mutex>

namespace gapless::test {

class Gate {
 public:
  void pass() {
    std::unique_lock lock(mu_);
    ++entered_;
    cv_.notify_all();
    cv_.wait(lock, [this] { return open_; });
  }
  void open() {
    std::lock_guard lock(mu_);
    open_ = true;
    cv_.notify_all();
  }
  int entered() {
    std::lock_guard lock(mu_);
    return entered_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
  int entered_ = 0;
};

// Opens the gate when it goes out of scope: declare it after the server and the client threads,
// so a failed REQUIRE cannot leave a worker blocked while they are torn down.
struct OpenOnExit {
  Gate& gate;
  ~OpenOnExit() { gate.open(); }
};

}  // namespace gapless::test
