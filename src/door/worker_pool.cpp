#include "gapless/door/worker_pool.h"

#include <utility>

namespace gapless::door {

WorkerPool::WorkerPool(std::size_t workers, std::size_t max_queue) : max_queue_(max_queue) {
  threads_.reserve(workers);
  for (std::size_t i = 0; i < workers; ++i) threads_.emplace_back([this] { work(); });
}

WorkerPool::~WorkerPool() {
  stop();
}

void WorkerPool::stop() {
  shutdown();
  for (std::thread& t : threads_) {
    if (t.joinable()) t.join();
  }
}

bool WorkerPool::stopped() const {
  std::lock_guard lock(mu_);
  return shutdown_;
}

bool WorkerPool::try_submit(std::function<void()>& job) {
  std::lock_guard lock(mu_);
  // Jobs beyond the idle workers are the ones that wait.
  const std::size_t waiting = jobs_.size() + 1 > idle_ ? jobs_.size() + 1 - idle_ : 0;
  if (shutdown_ || waiting > max_queue_) return false;
  jobs_.push_back(std::move(job));
  cv_.notify_one();
  return true;
}

void WorkerPool::shutdown() {
  std::deque<std::function<void()>> dropped;
  {
    std::lock_guard lock(mu_);
    shutdown_ = true;
    dropped.swap(jobs_);
    cv_.notify_all();
  }
  // Destroyed outside the lock: a job's captures may end a connection.
}

std::size_t WorkerPool::queued() const {
  std::lock_guard lock(mu_);
  return jobs_.size();
}

std::size_t WorkerPool::busy() const {
  std::lock_guard lock(mu_);
  return busy_;
}

void WorkerPool::work() {
  std::unique_lock lock(mu_);
  for (;;) {
    ++idle_;
    cv_.wait(lock, [this] { return shutdown_ || !jobs_.empty(); });
    --idle_;
    if (jobs_.empty()) return;  // shut down
    std::function<void()> job = std::move(jobs_.front());
    jobs_.pop_front();
    ++busy_;
    lock.unlock();
    job();
    job = nullptr;
    lock.lock();
    --busy_;
  }
}

}  // namespace gapless::door
