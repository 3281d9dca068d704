// Runs the Scheduler's warm-up stage in the background: whenever the workload mix or the policy
// has changed since its last complete pass (and once at start), it prepares the verdict cache for
// the request shapes asked most (placement::Scheduler::warm), so the first pod of each shape
// after a restart or a mix change is answered from the cache instead of paying for every node.
//
// A pass runs in chunks under the Scheduler's read lock and gives up as soon as the mix or the
// policy moves again; the next poll starts over. Answers never depend on it: without the warmer
// the same answers come, only the first ones slower.
// Thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>

#include "gapless/placement/scheduler.h"

namespace gapless::server {

class ScoreWarmer {
 public:
  // `model_complete`: whether the model is loaded (Extender::ready); passes before that do not
  // count for caught_up(). Null: always.
  explicit ScoreWarmer(const placement::Scheduler& scheduler,
                       std::function<bool()> model_complete = nullptr,
                       std::chrono::milliseconds poll = std::chrono::milliseconds(20));
  ~ScoreWarmer();  // stops the thread (a pass under way gives up at its next chunk)
  ScoreWarmer(const ScoreWarmer&) = delete;
  ScoreWarmer& operator=(const ScoreWarmer&) = delete;

  // True once a pass that began on a complete model has completed for the mix and policy in
  // force when it ended: the extender
  // reports ready only then (docs/extender-flags-and-routes.md, /readyz), so the first pods after a
  // start are served from a prepared cache. Stays true afterwards.
  bool caught_up() const { return caught_up_.load(); }
  // Passes completed so far (tests wait on it).
  std::uint64_t passes() const { return passes_.load(); }

 private:
  void run();

  const placement::Scheduler& scheduler_;
  const std::function<bool()> model_complete_;
  const std::chrono::milliseconds poll_;
  std::atomic<bool> caught_up_{false};
  std::atomic<std::uint64_t> passes_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;  // guarded by mu_
  std::atomic<bool> stop_flag_{false};
  std::thread thread_;
};

}  // namespace gapless::server
