#include "gapless/server/pairing_waits.h"

#include <algorithm>
#include <cstdio>

namespace gapless::server {

namespace {

const prometheus::Histogram::BucketBoundaries kWaitBuckets = {0.01, 0.05, 0.1, 0.25, 0.5, 1,
                                                              2.5,  5,    10,  20,   30};

std::string pairing_error(const std::string& node, const std::string& blocker) {
  return "pairing: node " + node + " is admitting pod " + (blocker.empty() ? "?" : blocker) +
         " with the same device request; retry";
}

}  // namespace

PairingWaits::PairingWaits(PairingOptions options, prometheus::Registry& registry,
                           std::function<void(const std::string&)> log_error)
    : options_(options),
      log_error_(std::move(log_error)),
      waits_(prometheus::BuildCounter()
                 .Name("gapless_pairing_waits_total")
                 .Help("Binds that waited for a pod on their node with the same device request "
                       "to be allocated (docs/node-pairing.md).")
                 .Register(registry)
                 .Add({})),
      wait_seconds_(prometheus::BuildHistogram()
                        .Name("gapless_pairing_wait_seconds")
                        .Help("How long binds that waited were held, until they went or gave up.")
                        .Register(registry)
                        .Add({}, kWaitBuckets)),
      open_pods_(prometheus::BuildGauge()
                     .Name("gapless_pairing_open_pods")
                     .Help("Pods bound and not yet allocated on their node, as the gate counts.")
                     .Register(registry)
                     .Add({})),
      expired_(prometheus::BuildCounter()
                   .Name("gapless_pairing_expired_total")
                   .Help("Open pods the gate gave up on after --pairing-timeout: never allocated.")
                   .Register(registry)
                   .Add({})),
      worker_([this] { run(); }) {}

PairingWaits::~PairingWaits() {
  shutdown();
}

double PairingWaits::seconds(Clock::time_point t) const {
  return std::chrono::duration<double>(t - epoch_).count();
}

void PairingWaits::admit(const std::string& node, const std::string& uid, const std::string& name,
                         placement::DeviceClasses classes, std::function<void()> go,
                         GiveUp give_up) {
  std::unique_lock lock(mu_);
  if (stopping_) {
    lock.unlock();
    return give_up("pairing: the extender is shutting down; retry");
  }
  const auto now = Clock::now();
  auto d = gate_.try_open(node, uid, name, std::move(classes), seconds(now));
  open_pods_.Set(static_cast<double>(gate_.open_count()));
  if (d.open) {
    lock.unlock();
    return go();
  }
  waits_.Increment();
  parked_[d.ticket] =
      Parked{std::move(go), std::move(give_up), node, d.blocker, now, now + options_.wait};
  wake_.notify_all();
}

void PairingWaits::schedule(const std::vector<placement::PairingGate::Released>& released) {
  // Stopping: the worker may be gone; shutdown() gives up what is still parked.
  if (stopping_) return;
  const auto now = Clock::now();
  for (const auto& r : released) {
    auto it = parked_.find(r.ticket);
    if (it == parked_.end()) continue;
    wait_seconds_.Observe(std::chrono::duration<double>(now - it->second.since).count());
    ready_.push_back(std::move(it->second.go));
    parked_.erase(it);
  }
  open_pods_.Set(static_cast<double>(gate_.open_count()));
  if (!released.empty()) wake_.notify_all();
}

void PairingWaits::close(const std::string& uid, placement::CloseReason why) {
  std::lock_guard lock(mu_);
  if (why == placement::CloseReason::kDeleted) expired_uids_.erase(uid);
  schedule(gate_.close(uid, why, seconds(Clock::now())));
}

void PairingWaits::note_bound(const std::string& node, const std::string& uid,
                              const std::string& name, placement::DeviceClasses classes) {
  std::lock_guard lock(mu_);
  if (expired_uids_.contains(uid)) return;
  gate_.note_bound(node, uid, name, std::move(classes), seconds(Clock::now()));
  open_pods_.Set(static_cast<double>(gate_.open_count()));
}

std::vector<std::string> PairingWaits::open_pods() const {
  std::lock_guard lock(mu_);
  return gate_.open_uids();
}

PairingWaits::Clock::time_point PairingWaits::tend(Clock::time_point now) {
  // Binds that waited too long give up; those behind them may go.
  for (auto it = parked_.begin(); it != parked_.end();) {
    if (it->second.deadline > now) {
      ++it;
      continue;
    }
    const std::string blocker = gate_.blocker_of(it->first);
    wait_seconds_.Observe(std::chrono::duration<double>(now - it->second.since).count());
    ready_.push_back(
        [give_up = std::move(it->second.give_up),
         why = pairing_error(it->second.node, blocker.empty() ? it->second.blocker : blocker)] {
          give_up(why);
        });
    const std::uint64_t ticket = it->first;
    it = parked_.erase(it);
    schedule(gate_.cancel(ticket, seconds(now)));
  }
  const double timeout = std::chrono::duration<double>(options_.timeout).count();
  auto expiry = gate_.expire(seconds(now), timeout);
  char seconds_text[32];
  std::snprintf(seconds_text, sizeof seconds_text, "%g", timeout);
  for (const auto& e : expiry.expired) {
    expired_.Increment();
    expired_uids_.insert(e.uid);
    if (log_error_) {
      log_error_("pairing: pod " + e.name + " was bound to node " + e.node +
                 " but the device plugin did not report it allocated within " + seconds_text +
                 " s (kubelet down, the pod rejected before Allocate, or the agent unable to "
                 "patch it); no longer holding back binds of the same device request there");
    }
  }
  schedule(expiry.released);
  Clock::time_point next = Clock::time_point::max();
  for (const auto& [ticket, p] : parked_) next = std::min(next, p.deadline);
  if (auto oldest = gate_.oldest_open()) {
    const auto at = epoch_ + std::chrono::duration_cast<Clock::duration>(
                                 std::chrono::duration<double>(*oldest + timeout));
    next = std::min(next, at);
  }
  return next;
}

void PairingWaits::run() {
  std::unique_lock lock(mu_);
  for (;;) {
    while (!ready_.empty()) {
      auto task = std::move(ready_.front());
      ready_.pop_front();
      lock.unlock();
      task();
      lock.lock();
    }
    if (stopping_) return;
    const auto next = tend(Clock::now());
    if (!ready_.empty()) continue;
    if (next == Clock::time_point::max()) {
      wake_.wait(lock);
    } else {
      wake_.wait_until(lock, next);
    }
  }
}

void PairingWaits::shutdown() {
  std::vector<GiveUp> gave_up;
  {
    std::lock_guard lock(mu_);
    if (stopping_) return;
    stopping_ = true;
    wake_.notify_all();
  }
  if (worker_.joinable()) worker_.join();
  {
    std::lock_guard lock(mu_);
    for (auto& [ticket, p] : parked_) gave_up.push_back(std::move(p.give_up));
    parked_.clear();
  }
  for (auto& g : gave_up) g("pairing: the extender is shutting down; retry");
}

}  // namespace gapless::server
