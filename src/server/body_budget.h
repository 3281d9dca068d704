// Bounds the memory that large request bodies take at once, whatever --workers is.
//
// A verb holds its body and then the JSON DOM parsed from it: scripts/rss_probe.py measured about
// 35 bytes of heap per body byte for the worst shape (`[{},{},...]`), so --workers concurrent
// bodies of --max-body-bytes could take workers x 35 x max_body_bytes (18 GB with 32 workers).
// Bodies up to kSmallBody bytes pass freely (kube-scheduler's nodeCache calls are tens of KB);
// a larger one, once read, leases its size from one budget of two maximal bodies before it is
// parsed, waiting for it at most a given time. A body larger than the budget gets it when nobody
// else holds any. Ending a lease returns freed heap pages to the system (malloc_trim). Private to
// the server.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <mutex>

namespace gapless::server {

class BodyBudget {
 public:
  static constexpr std::size_t kSmallBody = 256 * 1024;

  explicit BodyBudget(std::size_t max_body_bytes) : capacity_(2 * max_body_bytes) {}
  BodyBudget(const BodyBudget&) = delete;
  BodyBudget& operator=(const BodyBudget&) = delete;

  // Holds `bytes` of the budget until destroyed; empty when the wait ran out.
  class Lease {
   public:
    Lease() = default;
    Lease(Lease&& other) noexcept
        : budget_(other.budget_), bytes_(other.bytes_), granted_(other.granted_) {
      other.budget_ = nullptr;
    }
    Lease& operator=(Lease&&) = delete;
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    ~Lease() {
      if (budget_ != nullptr) budget_->release(bytes_);
    }
    bool granted() const { return granted_; }

   private:
    friend class BodyBudget;
    Lease(BodyBudget* budget, std::size_t bytes) : budget_(budget), bytes_(bytes) {}
    BodyBudget* budget_ = nullptr;
    std::size_t bytes_ = 0;
    bool granted_ = true;
  };

  // A lease for a body of `bytes`: at once for a small one, else once the budget has room,
  // waiting at most `wait` (then a lease that is not granted).
  Lease acquire(std::size_t bytes, std::chrono::steady_clock::duration wait);

  std::size_t capacity() const { return capacity_; }
  std::size_t in_use() const {
    std::lock_guard lock(mu_);
    return in_use_;
  }

 private:
  void release(std::size_t bytes);

  const std::size_t capacity_;
  mutable std::mutex mu_;
  std::condition_variable freed_;
  std::size_t in_use_ = 0;
};

}  // namespace gapless::server
