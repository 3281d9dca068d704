// A port of NVIDIA go-gpuallocator's "besteffort" policy (gpuallocator/besteffort_policy.go), the
// allocator the NVIDIA device plugin uses for whole GPUs, written from its description so that
// Gapless's whole-GPU choice can be compared with it on the same topologies. Test-only.
//
// Pair score: 100 per NVLink lane between the pair; otherwise by PCIe relation: single switch
// (PIX) 50, multiple switches (PXB) 40, host bridge (PHB) 30, same CPU (NODE) 20, cross CPU (SYS)
// 10. (The original also has "same board" 60, for dual-GPU boards; the annotation has no word for
// it.) A degraded NVLink counts as PCIe, at the link's path (SYS unless the annotation says).
// Set score: sum of the pair scores over all pairs of the set.
//
// allocate(available, size): pad the list with empty slots to a multiple of `size`; enumerate
// every partition of the padded list into sets of `size` (the first element of each set is the
// first one left, so each partition is seen once; a set holding some but not all of the padding
// is skipped); the partition score is the sum of its set scores (pairs with padding score 0);
// keep the best partition (the first found wins ties; only partitions with a set without
// padding count); return its highest-scoring set without padding (the first wins ties).
// Exponential in the number of GPUs: allocate() stops after looking at `cap` candidate sets.
//
// One deliberate difference from the Go code: its last step also considers the set that holds
// the padding, so it can return fewer than `size` real devices; here only full sets are returned.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "gapless/model/node.h"
#include "gapless/model/topology.h"

namespace gapless::besteffort {

inline int pair_score(const model::Link& link) {
  if (link.is_nvlink()) return 100 * link.nvlink_count;
  switch (link.path) {
    case model::PciePath::kPIX:
      return 50;
    case model::PciePath::kPXB:
      return 40;
    case model::PciePath::kPHB:
      return 30;
    case model::PciePath::kNODE:
      return 20;
    case model::PciePath::kSYS:
      return 10;
  }
  return 0;
}

// Pair scores of one node, looked up by GPU index.
class PairScores {
 public:
  explicit PairScores(const model::Node& node)
      : n_(static_cast<int>(node.gpus.size())), m_(static_cast<std::size_t>(n_) * n_, 0) {
    for (int a = 0; a < n_; ++a) {
      for (int b = 0; b < n_; ++b) {
        if (a != b) m_[a * n_ + b] = pair_score(node.links.get(a, b));
      }
    }
  }
  // kPadding (or any negative index) scores 0 with everything.
  int operator()(int a, int b) const { return a < 0 || b < 0 || a == b ? 0 : m_[a * n_ + b]; }
  int set_score(const std::vector<int>& set) const {
    int score = 0;
    for (std::size_t i = 0; i < set.size(); ++i) {
      for (std::size_t j = i + 1; j < set.size(); ++j) score += (*this)(set[i], set[j]);
    }
    return score;
  }

 private:
  int n_;
  std::vector<int> m_;
};

inline constexpr int kPadding = -1;

// How many partitions allocate() scores for `available` GPUs and sets of `size` (as a double:
// it overflows 64 bits for large nodes): the padding all lands in one set, so it is the number
// of ways to pick that set's real GPUs times the partitions of the rest into full sets.
inline double partition_count(int available, int size) {
  if (size <= 0 || size > available) return 0;
  const int padding = (size - available % size) % size;
  auto choose = [](int n, int k) {
    double c = 1;
    for (int i = 1; i <= k; ++i) c = c * (n - k + i) / i;
    return c;
  };
  // Partitions of `items` into unordered sets of `size`: fix the first item of each set.
  auto partitions = [&](int items) {
    double p = 1;
    for (int left = items; left > 0; left -= size) p *= choose(left - 1, size - 1);
    return p;
  };
  if (padding == 0) return partitions(available);
  return choose(available, size - padding) * partitions(available - (size - padding));
}

struct Outcome {
  std::vector<int> set;          // in the order of `available`; empty: none found
  int score = 0;                 // set_score(set)
  std::uint64_t partitions = 0;  // partitions scored
  std::uint64_t sets = 0;        // candidate sets looked at, padding-mixed ones included
  bool capped = false;           // stopped at the cap: `set` is the best of those seen
};

namespace detail {

// The recursion keeps one frame per set already in the partition (depth), with buffers sized
// up front, so enumerating allocates nothing.
class Partitioner {
 public:
  Partitioner(const PairScores& scores, const std::vector<int>& devices, int size,
              std::uint64_t cap)
      : scores_(scores), size_(size), cap_(cap) {
    for (int d : devices) padding_ += d == kPadding ? 1 : 0;
    const int depth = static_cast<int>(devices.size()) / size;
    left_.assign(depth, {});
    for (int i = 0; i < depth; ++i) left_[i].reserve(devices.size());
    left_[0] = devices;
    accum_.assign(depth, std::vector<int>(size));
    best.assign(depth, std::vector<int>(size));
  }

  void run() { iterate(0, 0); }

  Outcome out;
  std::vector<std::vector<int>> best;  // the best partition, once out.partitions > 0

 private:
  // left_[depth]: the devices not yet in a set; accum_[0..depth): the sets so far.
  void iterate(int depth, int score_so_far) {
    const std::vector<int>& devices = left_[depth];
    const int n = static_cast<int>(devices.size());
    std::vector<int>& set = accum_[depth];
    if (n == size_) {  // the last set is what is left
      set = devices;
      finish(depth + 1, score_so_far + scores_.set_score(set));
      return;
    }
    // Every set made of devices[0] and size-1 of the others, in lexicographic order.
    int idx[model::LinkGraph::kMaxGpus];
    for (int i = 0; i < size_; ++i) idx[i] = i;
    while (true) {
      if (out.sets >= cap_) {  // one more set to look at, and no budget left
        out.capped = true;
        return;
      }
      ++out.sets;
      int pad = 0;
      for (int i = 0; i < size_; ++i) {
        set[i] = devices[idx[i]];
        pad += set[i] == kPadding ? 1 : 0;
      }
      if (pad == 0 || pad == padding_) {
        std::vector<int>& rest = left_[depth + 1];
        rest.clear();
        for (int i = 0, j = 0; i < n; ++i) {
          if (j < size_ && idx[j] == i) {
            ++j;
          } else {
            rest.push_back(devices[i]);
          }
        }
        iterate(depth + 1, score_so_far + scores_.set_score(set));
        if (out.capped) return;
      }
      // Next combination: idx[1..size-1] over positions 1..n-1; idx[0] stays 0.
      int level = size_ - 1;
      while (level >= 1 && idx[level] == n - size_ + level) --level;
      if (level < 1) break;
      ++idx[level];
      for (int i = level + 1; i < size_; ++i) idx[i] = idx[i - 1] + 1;
    }
  }

  void finish(int sets, int score) {
    bool full_set = false;
    for (int s = 0; s < sets && !full_set; ++s) {
      full_set = std::find(accum_[s].begin(), accum_[s].end(), kPadding) == accum_[s].end();
    }
    if (!full_set) return;
    ++out.partitions;
    if (out.partitions == 1 || score > best_score_) {
      best = accum_;
      best_score_ = score;
    }
  }

  const PairScores& scores_;
  int size_;
  int padding_ = 0;
  std::uint64_t cap_;
  std::vector<std::vector<int>> left_;
  std::vector<std::vector<int>> accum_;
  int best_score_ = 0;
};

}  // namespace detail

// besteffort's choice of `size` GPUs out of `available` (GPU indices, in the order the device
// plugin would list them). Stops after looking at `cap` candidate sets (the work grows with
// the sets looked at, which the padding makes far more than the partitions scored).
inline Outcome allocate(const PairScores& scores, const std::vector<int>& available, int size,
                        std::uint64_t cap = UINT64_MAX) {
  if (size <= 0 || static_cast<int>(available.size()) < size ||
      static_cast<int>(available.size()) > model::LinkGraph::kMaxGpus) {
    return {};
  }
  std::vector<int> devices = available;
  while (devices.size() % size != 0) devices.push_back(kPadding);
  detail::Partitioner p(scores, devices, size, cap);
  p.run();
  Outcome out = p.out;
  if (out.partitions == 0) return out;
  bool have = false;
  for (const auto& set : p.best) {
    if (std::find(set.begin(), set.end(), kPadding) != set.end()) continue;
    const int score = scores.set_score(set);
    if (!have || score > out.score) {
      out.set = set;
      out.score = score;
      have = true;
    }
  }
  return out;
}

}  // namespace gapless::besteffort
