// Pods seen by filter/prioritize and not yet bound, by UID. kube-scheduler's bind call carries
// only the pod's name and UID, so bind needs the request parsed at filter time.
//
// Bounded in size and age: pods that are filtered but never bound (deleted, bound elsewhere,
// rejected by another extender) fall out; they never held capacity, since Gapless commits at bind.
// Thread-safe.
#pragma once

#include <chrono>
#include <cstddef>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "gapless/k8s/pod_request.h"

namespace gapless::server {

class PendingPods {
 public:
  using Clock = std::chrono::steady_clock;
  explicit PendingPods(std::size_t capacity = 10000,
                       Clock::duration max_age = std::chrono::minutes(30))
      : capacity_(capacity), max_age_(max_age) {}

  void remember(const k8s::ParsedPod& pod);
  std::optional<k8s::ParsedPod> find(const std::string& uid) const;
  void forget(const std::string& uid);
  std::size_t size() const;

 private:
  struct Entry {
    k8s::ParsedPod pod;
    Clock::time_point seen;
  };
  void evict_locked(Clock::time_point now);

  const std::size_t capacity_;
  const Clock::duration max_age_;
  mutable std::mutex mu_;
  std::map<std::string, Entry> by_uid_;
};

}  // namespace gapless::server
