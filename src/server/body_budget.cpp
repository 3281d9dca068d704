#include "body_budget.h"

#include <algorithm>

#ifdef __GLIBC__
#include <malloc.h>
#endif

namespace gapless::server {

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
  {
    std::lock_guard lock(mu_);
    in_use_ -= bytes;
  }
  freed_.notify_all();
#ifdef __GLIBC__
  // The body and its DOM are freed by now, but into this worker thread's malloc arena, which
  // keeps the pages: without this each worker's arena grows to the largest parse it ever did,
  // and the budget would bound only what is in use, not the RSS.
  malloc_trim(0);
#endif
}

}  // namespace gapless::server
