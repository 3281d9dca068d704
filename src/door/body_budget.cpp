#include "gapless/door/body_budget.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

#ifdef __GLIBC__
#include <malloc.h>
#endif

namespace gapless::door {
namespace {

// The process's resident set in bytes (/proc/self/statm), or 0 where it cannot be read.
std::size_t resident_bytes() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  unsigned long size = 0, resident = 0;
  const int read = std::fscanf(f, "%lu %lu", &size, &resident);
  std::fclose(f);
  if (read != 2) return 0;
  return static_cast<std::size_t>(resident) * static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
}

}  // namespace

BodyBudget::BodyBudget(std::size_t max_body_bytes, std::chrono::steady_clock::duration idle_trim)
    : capacity_(2 * max_body_bytes),
      idle_trim_(idle_trim),
      rss_after_trim_(resident_bytes()),
      trimmer_([this](std::stop_token stop) { trimmer(stop); }) {}

BodyBudget::~BodyBudget() {
  trimmer_.request_stop();  // wakes the trimmer through its stop_token
}

BodyBudget::Lease BodyBudget::acquire(std::size_t bytes, std::chrono::steady_clock::duration wait) {
  if (bytes <= kSmallBody) return Lease();
  std::unique_lock lock(mu_);
  // Progress is guaranteed: a lease is only held while its request is handled, and an empty
  // budget admits any size.
  const bool room = freed_.wait_for(lock, wait, [&] {
    return in_use_ == 0 || bytes <= capacity_ - std::min(in_use_, capacity_);
  });
  if (!room) {
    Lease refused;
    refused.granted_ = false;
    return refused;
  }
  in_use_ += bytes;
  return Lease(this, bytes);
}

void BodyBudget::release(std::size_t bytes) {
  bool trim_now = false;
  {
    std::lock_guard lock(mu_);
    in_use_ -= bytes;
    dirty_ = true;
    last_release_ = std::chrono::steady_clock::now();
    // The body and its parse are freed by now, into this worker's arena. Grown past the
    // capacity since the last trim (large bodies in many arenas, or a DOM of a hostile
    // body): trim now, as the memory bound in the README assumes. Else the trimmer's turn.
    trim_now = resident_bytes() > rss_after_trim_ + capacity_;
    if (trim_now) {
      dirty_ = false;
      ++trims_.at_release;
    }
  }
  freed_.notify_all();
  if (trim_now) {
    trim();
  } else {
    untrimmed_.notify_all();
  }
}

void BodyBudget::note_freed() {
  {
    std::lock_guard lock(mu_);
    dirty_ = true;
    last_release_ = std::chrono::steady_clock::now();
  }
  untrimmed_.notify_all();
}

void BodyBudget::trim() {
#ifdef __GLIBC__
  malloc_trim(0);
#endif
  const std::size_t rss = resident_bytes();
  std::lock_guard lock(mu_);
  rss_after_trim_ = rss;
}

void BodyBudget::trimmer(std::stop_token stop) {
  std::unique_lock lock(mu_);
  while (!stop.stop_requested()) {
    if (!untrimmed_.wait(lock, stop, [&] { return dirty_ && in_use_ == 0; })) return;
    // Idle for idle_trim_ since the last large body ended: trim. A new one restarts the wait.
    const auto due = last_release_ + idle_trim_;
    if (untrimmed_.wait_until(lock, stop, due, [&] { return !dirty_ || in_use_ > 0; })) continue;
    if (stop.stop_requested()) return;
    if (std::chrono::steady_clock::now() < last_release_ + idle_trim_) continue;
    dirty_ = false;
    ++trims_.when_idle;
    lock.unlock();  // a trim takes milliseconds: requests must not wait for it
    trim();
    lock.lock();
  }
}

}  // namespace gapless::door
