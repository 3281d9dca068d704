// The threads that answer complete requests (--workers), and the requests that may wait for one
// (--max-queue). Jobs never touch a socket: the event loop reads every request before it submits
// one and writes every answer, so a job's time is the route's own. (The extender's
// bind threads are one too.)
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace gapless::door {

class WorkerPool {
 public:
  // Threads start at once.
  WorkerPool(std::size_t workers, std::size_t max_queue);
  ~WorkerPool();  // drops queued jobs, waits for running ones
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // Queues `job` unless every worker is busy and max_queue jobs already wait: then false and
  // `job` is left untouched (the caller answers "overloaded" itself).
  bool try_submit(std::function<void()>& job);
  // Destroys the queued jobs unrun (their connections close unanswered) and refuses new ones;
  // running jobs finish. Idempotent.
  void shutdown();
  // shutdown(), then waits for the running jobs. Call from outside the pool's threads.
  void stop();
  bool stopped() const;

  std::size_t queued() const;
  std::size_t busy() const;
  std::size_t workers() const { return threads_.size(); }
  std::size_t max_queue() const { return max_queue_; }

 private:
  void work();

  const std::size_t max_queue_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  std::size_t idle_ = 0;
  std::size_t busy_ = 0;
  bool shutdown_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace gapless::door
