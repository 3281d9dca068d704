// Bounds the memory that large request bodies take at once, whatever --workers is.
//
// A verb holds its body and then the JSON DOM parsed from it: scripts/rss_probe.py measured about
// 35 bytes of heap per body byte for the worst shape (`[{},{},...]`), so --workers concurrent
// bodies of --max-body-bytes could take workers x 35 x max_body_bytes (18 GB with 32 workers).
// Bodies up to kSmallBody bytes pass freely (kube-scheduler's nodeCache calls are tens of KB);
// a larger one, once read, leases its size from one budget of two maximal bodies before it is
// parsed, waiting for it at most a given time. A body larger than the budget gets it when nobody
// else holds any.
//
// Freed heap goes back to the system (malloc_trim): a worker's malloc arena otherwise keeps the
// pages of the largest parse it ever did, and the budget would bound only what is in use, not the
// RSS. But handing them back after every large body made the next one fault them in again: 3 ms
// of a 7.5 ms full-node filter at 1,000 nodes (bench/README.md, issue 12). So a lease that ends
// trims at once only when the process has grown by more than the budget's capacity since the last
// trim (what an attack with large bodies does); otherwise a trimmer thread trims once no large
// body has been handled for `idle_trim`. A burst of full-node calls keeps its pages; RSS still
// falls back when the burst or the attack stops. The door trims after large answers
// (RouteTable::note_large_request_freed); the extender's routes lease bodies from it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <thread>

namespace gapless::door {

class BodyBudget {
 public:
  static constexpr std::size_t kSmallBody = 256 * 1024;
  static constexpr std::chrono::milliseconds kIdleTrim{1000};

  explicit BodyBudget(std::size_t max_body_bytes,
                      std::chrono::steady_clock::duration idle_trim = kIdleTrim);
  ~BodyBudget();
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
  // A large request was answered and its memory freed: its answer once written, a body refused
  // unparsed, both later than any lease. The trimmer then trims once `idle_trim` has passed
  // without another large body, as after a lease.
  void note_freed();

  std::size_t capacity() const { return capacity_; }
  std::size_t in_use() const {
    std::lock_guard lock(mu_);
    return in_use_;
  }
  // Trims done so far: at the end of a lease (the process had grown past the capacity) and by
  // the trimmer once idle. For tests and diagnostics.
  struct Trims {
    std::size_t at_release = 0, when_idle = 0;
  };
  Trims trims() const {
    std::lock_guard lock(mu_);
    return trims_;
  }

 private:
  void release(std::size_t bytes);
  // Hands freed heap back and notes the RSS it left. Takes mu_ only for the note.
  void trim();
  void trimmer(std::stop_token stop);

  const std::size_t capacity_;
  const std::chrono::steady_clock::duration idle_trim_;
  mutable std::mutex mu_;
  std::condition_variable freed_;
  std::condition_variable_any untrimmed_;  // the trimmer's
  std::size_t in_use_ = 0;
  bool dirty_ = false;  // a large body ended since the last trim
  std::chrono::steady_clock::time_point last_release_;
  std::size_t rss_after_trim_ = 0;
  Trims trims_;
  std::jthread trimmer_;  // last: started after, and stopped before, the members it reads
};

}  // namespace gapless::door
