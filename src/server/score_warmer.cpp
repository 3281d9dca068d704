#include "gapless/server/score_warmer.h"

#include <memory>
#include <utility>

namespace gapless::server {

ScoreWarmer::ScoreWarmer(const placement::Scheduler& scheduler,
                         std::function<bool()> model_complete, std::chrono::milliseconds poll)
    : scheduler_(scheduler),
      model_complete_(std::move(model_complete)),
      poll_(poll),
      thread_([this] { run(); }) {}

ScoreWarmer::~ScoreWarmer() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  stop_flag_ = true;
  cv_.notify_all();
  thread_.join();
}

void ScoreWarmer::run() {
  // What the last complete pass prepared for: the policy (its cache) and the mix version.
  std::shared_ptr<const placement::LoadedPolicy> done_policy;
  std::uint64_t done_mix = 0;
  bool done_complete = false;  // whether that pass began on a complete model
  for (bool first = true;; first = false) {
    {
      std::unique_lock lock(mu_);
      if (!first) cv_.wait_for(lock, poll_, [this] { return stopping_; });
      if (stopping_) return;
    }
    const bool model_complete = !model_complete_ || model_complete_();
    const auto policy = scheduler_.policy();
    const std::uint64_t mix = scheduler_.mix_version();
    if (policy == done_policy && mix == done_mix && (done_complete || !model_complete)) continue;
    const bool complete = scheduler_.warm(*policy, [&] {
      return stop_flag_.load() || scheduler_.mix_version() != mix || scheduler_.policy() != policy;
    });
    if (!complete) continue;
    done_policy = policy;
    done_mix = mix;
    done_complete = model_complete;
    ++passes_;
    if (model_complete && scheduler_.policy() == policy && scheduler_.mix_version() == mix) {
      caught_up_ = true;
    }
  }
}

}  // namespace gapless::server
