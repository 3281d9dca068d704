// Whether this replica's kube-scheduler leads: it holds kube-scheduler's leader Lease
// (leaderElection in its configuration; --scheduler-lease NAMESPACE/NAME). Only the leader's
// queue parks pods (the requeue nudges them) and only the leader should act for a waiting pod
// (consolidation evicts for it). kube-scheduler's lease identity is "<host name>_<uuid>", and a
// pod's host name is its name, so the holder is compared with this replica's pod name.
//
// An answer is trusted for `recheck`. A lease that cannot be read (no answer, 403, 500) counts
// as `if_unreadable`: yes for the requeue (a needless patch costs one retry of a pod), no for
// evictions (a needless eviction kills a pod). A Lease that does not exist (404): nobody leads.
//
// Not thread-safe: one thread asks (the requeue's and the consolidation's step threads each own
// one).
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <utility>

#include "gapless/k8s/api_client.h"

namespace gapless::k8s {

// Whether `holder` (a Lease's spec.holderIdentity) is the kube-scheduler of pod `replica`.
bool lease_held_by(const std::string& holder, const std::string& replica);

struct LeaseOptions {
  // Empty name: no leader check, every replica leads.
  std::string lease_namespace;
  std::string lease_name;
  std::string replica_name;  // this replica's pod name
  std::chrono::milliseconds recheck{5000};
  bool if_unreadable = true;
};

class SchedulerLease {
 public:
  using Clock = std::chrono::steady_clock;
  using Log = std::function<void(const std::string&)>;
  // `who`: the log lines' prefix ("requeue", "consolidation").
  SchedulerLease(ApiTransport& api, LeaseOptions options, std::string who, Log log = nullptr)
      : api_(api), options_(std::move(options)), who_(std::move(who)), log_(std::move(log)) {}

  bool leads(Clock::time_point now);
  void forget() { answer_.reset(); }  // the next leads() asks the API server

 private:
  ApiTransport& api_;
  const LeaseOptions options_;
  const std::string who_;
  const Log log_;
  std::optional<std::pair<Clock::time_point, bool>> answer_;  // when asked, answer
};

}  // namespace gapless::k8s
