// Runs numbered jobs on a few threads, for the sweeps: every (trace, policy, seed) is one job.
#pragma once

#include <algorithm>
#include <atomic>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace gapless::bench {

// Calls run(job) for job 0..total-1 on `threads` threads (this one included), each job once.
// After each job, progress(done, total, run's returned label) runs under a lock, if set.
inline void run_jobs(int total, unsigned threads, const std::function<std::string(int job)>& run,
                     const std::function<void(int, int, const std::string&)>& progress) {
  std::atomic<int> next{0};
  int done = 0;
  std::mutex mu;
  auto worker = [&] {
    for (int job = next++; job < total; job = next++) {
      const std::string what = run(job);
      std::lock_guard<std::mutex> lock(mu);
      ++done;
      if (progress) progress(done, total, what);
    }
  };
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < std::max(1u, threads); ++t) pool.emplace_back(worker);
  worker();
  for (std::thread& t : pool) t.join();
}

}  // namespace gapless::bench
