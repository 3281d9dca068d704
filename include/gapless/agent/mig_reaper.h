// Destroys the MIG instances the agent created once no pod uses them any more: an instance is
// in use while a pod bound to this node that has not finished (Succeeded/Failed) names it in its
// allocation record. One unused for the whole grace period is destroyed; a pod naming it again
// within the period keeps it (a replacement pod reuses it at once). Instances the agent did not
// create are never touched. When the pod list cannot be read nothing is destroyed.
//
// Ownership: borrows the MigInstances and the API transport. Thread-safety: one thread sweeps.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "gapless/agent/mig_instances.h"
#include "gapless/k8s/api_client.h"

namespace gapless::agent {

class MigReaper {
 public:
  using Clock = std::chrono::steady_clock;
  MigReaper(MigInstances& mig, k8s::ApiTransport& api, std::string node, std::chrono::seconds grace,
            std::function<void(const std::string&)> log);

  // One look at time `now` (the caller's clock, so tests need no waiting). Returns what it
  // destroyed. Errors: the pod list cannot be read (then nothing is destroyed).
  Result<std::vector<MigSlot>> sweep(Clock::time_point now);

 private:
  MigInstances& mig_;
  k8s::ApiTransport& api_;
  std::string node_;
  std::chrono::seconds grace_;
  std::function<void(const std::string&)> log_;
  std::map<MigSlot, Clock::time_point> unused_since_;
};

}  // namespace gapless::agent
