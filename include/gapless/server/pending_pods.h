// Pods seen by filter/prioritize and not yet bound, by UID. kube-scheduler's bind call carries
// only the pod's name and UID, so bind needs the request parsed at filter time.
//
// Bounded in count, bytes and age: pods that are filtered but never bound (deleted, bound
// elsewhere, rejected by another extender) fall out, oldest first; they never held capacity,
// since Gapless commits at bind. The byte bound matters because a pod's labels are the client's
// to choose: 60 filters of pods with a 10 MB label each would otherwise hold 600 MB for 30 min.
// A pod larger than the whole byte budget is not kept at all (its bind then asks for a retry).
// Thread-safe.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "gapless/k8s/pod_request.h"

namespace gapless::server {

class PendingPods {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr std::size_t kDefaultMaxBytes = 64 * 1024 * 1024;

  explicit PendingPods(std::size_t capacity = 10000,
                       Clock::duration max_age = std::chrono::minutes(30),
                       std::size_t max_bytes = kDefaultMaxBytes)
      : capacity_(capacity), max_age_(max_age), max_bytes_(max_bytes) {}

  void remember(const k8s::ParsedPod& pod);
  std::optional<k8s::ParsedPod> find(const std::string& uid) const;
  void forget(const std::string& uid);
  // The pods remembered now, oldest first, at most `max` of them, with how long ago each was
  // last seen (the GPU map's waiting pods, docs/gpu-map.md).
  struct Listed {
    k8s::ParsedPod pod;
    double seen_seconds_ago = 0;
  };
  std::vector<Listed> list(std::size_t max) const;
  std::size_t size() const;
  // The estimated memory the entries hold (see estimated_bytes).
  std::size_t bytes() const;

  // What one entry costs: its strings, labels and models plus a fixed overhead per node and
  // string. An estimate (allocator slack is not counted), but it grows with every byte a client
  // controls.
  static std::size_t estimated_bytes(const k8s::ParsedPod& pod);

 private:
  struct Entry {
    k8s::ParsedPod pod;
    Clock::time_point seen;
    std::uint64_t order = 0;  // key in by_age_
    std::size_t bytes = 0;
  };
  void erase_locked(std::map<std::string, Entry>::iterator it);
  void evict_locked(Clock::time_point now);

  const std::size_t capacity_;
  const Clock::duration max_age_;
  const std::size_t max_bytes_;
  mutable std::mutex mu_;
  std::map<std::string, Entry> by_uid_;
  std::map<std::uint64_t, std::string> by_age_;  // insertion order -> uid; oldest first
  std::uint64_t next_order_ = 0;
  std::size_t bytes_ = 0;
};

}  // namespace gapless::server
