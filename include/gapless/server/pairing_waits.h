// The extender's side of node pairing (docs/node-pairing.md): the bind gate
// (placement/pairing_gate.h) with real time, parked binds and their deadlines, and metrics.
//
// A bind whose pod conflicts with an open pod on its node is parked (no thread blocked). When
// the blocker closes (the pod informer saw gapless.io/allocated, the pod started, or was deleted;
// or it expired after `timeout`), the parked bind runs on this object's worker thread. One that
// still waits after `wait` gives up with the pairing Error, so kube-scheduler retries the pod.
// Shutdown gives up every parked bind.
//
// Metrics: gapless_pairing_waits_total, gapless_pairing_wait_seconds,
// gapless_pairing_open_pods, gapless_pairing_expired_total.
//
// Thread-safe. `go` and `give_up` run outside the lock: on the admitting thread (open at once)
// or on the worker thread.
#pragma once

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "gapless/placement/pairing_gate.h"

namespace gapless::server {

struct PairingOptions {
  std::chrono::milliseconds wait{20000};     // --pairing-wait
  std::chrono::milliseconds timeout{60000};  // --pairing-timeout
};

class PairingWaits {
 public:
  using Clock = std::chrono::steady_clock;
  using GiveUp = std::function<void(const std::string& why)>;

  PairingWaits(PairingOptions options, prometheus::Registry& registry,
               std::function<void(const std::string&)> log_error);
  ~PairingWaits();  // shutdown()
  PairingWaits(const PairingWaits&) = delete;
  PairingWaits& operator=(const PairingWaits&) = delete;

  // A bind of pod `uid` ("ns/name") to `node`: `go` now when the gate opens it, later when its
  // blocker closes, or `give_up` (the pairing Error) after the wait or at shutdown.
  void admit(const std::string& node, const std::string& uid, const std::string& name,
             placement::DeviceClasses classes, std::function<void()> go, GiveUp give_up);
  // What the pod informer sees (server/pairing_pods.cpp).
  void close(const std::string& uid, placement::CloseReason why);
  // A pod bound to `node` with a record and not yet allocated (seen on the watch: bound by an
  // earlier run or another replica). Not reopened once expired.
  void note_bound(const std::string& node, const std::string& uid, const std::string& name,
                  placement::DeviceClasses classes);
  std::vector<std::string> open_pods() const;
  // Gives up every parked bind ("the extender is shutting down"); later admits give up at once.
  void shutdown();

 private:
  struct Parked {
    std::function<void()> go;
    GiveUp give_up;
    std::string node, blocker;
    Clock::time_point since, deadline;
  };
  double seconds(Clock::time_point t) const;
  // REQUIRES: mu_. Moves the released binds to ready_.
  void schedule(const std::vector<placement::PairingGate::Released>& released);
  // REQUIRES: mu_. Deadlines and expiry at `now`; the next time to look.
  Clock::time_point tend(Clock::time_point now);
  void run();

  const PairingOptions options_;
  const Clock::time_point epoch_ = Clock::now();
  std::function<void(const std::string&)> log_error_;
  prometheus::Counter& waits_;
  prometheus::Histogram& wait_seconds_;
  prometheus::Gauge& open_pods_;
  prometheus::Counter& expired_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  placement::PairingGate gate_;
  std::map<std::uint64_t, Parked> parked_;
  std::deque<std::function<void()>> ready_;  // run on the worker, outside mu_
  std::set<std::string> expired_uids_;       // not reopened by note_bound
  bool stopping_ = false;
  std::thread worker_;
};

}  // namespace gapless::server
