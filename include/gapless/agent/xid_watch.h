// XID errors: the driver's numbered reports of GPU faults (NVIDIA's "XID Errors" guide). The
// agent subscribes to NVML's critical-XID events and marks a GPU unhealthy on the XIDs below,
// which mean the GPU itself is broken until it is reset or repaired. XIDs that an application
// causes (13 graphics exception, 31 MMU fault, 43 stopped channel, 45 preemptive cleanup,
// 68 video decoder, 109 context-switch timeout) are counted but leave the GPU healthy, as
// NVIDIA's device plugin does by default.
//
// Ownership: an XidWatcher borrows the NvmlLibrary (it must outlive the watcher) and owns its
// NVML event set. Thread-safety: none; the agent's loop thread uses it.
#pragma once

#include <array>
#include <chrono>
#include <vector>

#include "gapless/agent/gpu_scan.h"

namespace gapless::agent {

// 48 double-bit (uncorrectable) ECC error; 63 ECC page retirement / row remapping recorded,
// reset pending; 64 page retirement / row remapping failed; 74 NVLink error; 79 GPU has fallen
// off the bus; 92 high single-bit ECC error rate; 94 contained ECC error (memory unusable until
// reset); 95 uncontained ECC error; 119 GSP RPC timeout; 120 GSP error.
inline constexpr std::array<unsigned long long, 10> kCriticalXids = {48, 63, 64, 74,  79,
                                                                     92, 94, 95, 119, 120};

bool is_critical_xid(unsigned long long xid);

struct XidEvent {
  int gpu = -1;  // index; -1 when the event names a device the watcher did not register
  unsigned long long xid = 0;
};

class XidWatcher {
 public:
  // Registers GPUs 0..count-1 for critical-XID events; failures go to on_error (a driver
  // without the event API leaves the watcher inactive).
  XidWatcher(const NvmlLibrary& nvml, NvmlErrorSink on_error);
  ~XidWatcher();
  XidWatcher(const XidWatcher&) = delete;
  XidWatcher& operator=(const XidWatcher&) = delete;

  bool active() const { return set_ != nullptr; }
  // Waits up to `timeout` for an event, then takes the others already queued. Empty when none
  // came. Inactive: sleeps `timeout` and returns nothing.
  std::vector<XidEvent> wait(std::chrono::milliseconds timeout);

 private:
  const NvmlLibrary& nvml_;
  NvmlErrorSink on_error_;
  nvmlEventSet_t set_ = nullptr;
  std::vector<nvmlDevice_t> devices_;  // by index
};

}  // namespace gapless::agent
