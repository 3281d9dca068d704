// Small random clusters and pods for the limit's tests (limit_test, offline_repair_test): few
// nodes and pods, so a brute-force optimum stays cheap where a test wants one.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "trace.h"

namespace gapless::bench::testing {

// A trace pod with a name later than every earlier one (the workload keeps name order).
inline TracePod limit_pod(int gpus, int milli, std::int64_t cpu = 1000,
                          std::vector<std::string> models = {}) {
  static int n = 0;
  return {"p" + std::to_string(100000 + n++), cpu, 1024, gpus, milli, std::move(models)};
}

// The most of each thing drawn (nodes' cores and GiB of memory in steps of 4).
struct RandomSizes {
  int nodes = 3, node_cpu = 4, node_memory = 3, node_gpus = 2;
  int pods_min = 3, pods_max = 6, whole_gpus = 2;
  int share_step = 100;   // shares of step, 2 x step, ... below 1000 milli
  bool cpu_only = false;  // one pod in seven without GPUs
};

class RandomLimit {
 public:
  RandomLimit(std::uint32_t seed, RandomSizes sizes) : rng_(seed), sizes_(sizes) {}

  int pick(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  std::mt19937& rng() { return rng_; }

  std::vector<TraceNode> nodes() {
    std::vector<TraceNode> out;
    for (int n = pick(1, sizes_.nodes); n > 0; --n) {
      out.push_back({"n" + std::to_string(n), 4000LL * pick(1, sizes_.node_cpu),
                     4096LL * pick(1, sizes_.node_memory), pick(1, sizes_.node_gpus),
                     pick(0, 3) == 0 ? "A100" : "T4"});
    }
    return out;
  }
  // Pods of any kind, some only for A100s, with 0-8 cores and 0-4 GiB.
  std::vector<TracePod> pods() {
    std::vector<TracePod> out;
    for (int p = pick(sizes_.pods_min, sizes_.pods_max); p > 0; --p) {
      const std::vector<std::string> models =
          pick(0, 4) == 0 ? std::vector<std::string>{"A100"} : std::vector<std::string>{};
      const std::int64_t cpu = 1000LL * pick(0, 8);
      if (sizes_.cpu_only && pick(0, 6) == 0) {
        out.push_back(limit_pod(0, 0, cpu));
      } else if (pick(0, 3) == 0) {
        out.push_back(limit_pod(pick(1, sizes_.whole_gpus), 1000, cpu, models));
      } else {
        const int step = sizes_.share_step;
        out.push_back(limit_pod(1, step * pick(1, 1000 / step - 1), cpu, models));
      }
      out.back().memory_mib = 1024LL * pick(0, 4);
    }
    return out;
  }

 private:
  std::mt19937 rng_;
  RandomSizes sizes_;
};

}  // namespace gapless::bench::testing
