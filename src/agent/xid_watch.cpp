#include "gapless/agent/xid_watch.h"

#include <algorithm>
#include <thread>

namespace gapless::agent {

bool is_critical_xid(unsigned long long xid) {
  return std::find(kCriticalXids.begin(), kCriticalXids.end(), xid) != kCriticalXids.end();
}

XidWatcher::XidWatcher(const NvmlLibrary& nvml, NvmlErrorSink on_error)
    : nvml_(nvml), on_error_(std::move(on_error)) {
  const NvmlFunctions& f = nvml_.fn();
  if (f.event_set_create == nullptr || f.register_events == nullptr ||
      f.event_set_wait == nullptr) {
    return;
  }
  unsigned int count = 0;
  if (f.device_count(&count) != NVML_SUCCESS) return;
  if (nvmlReturn_t r = f.event_set_create(&set_); r != NVML_SUCCESS) {
    if (on_error_) on_error_("XID event set: " + nvml_.error(r));
    set_ = nullptr;
    return;
  }
  devices_.assign(count, nullptr);
  for (unsigned int i = 0; i < count; ++i) {
    nvmlDevice_t dev = nullptr;
    nvmlReturn_t r = f.handle_by_index(i, &dev);
    if (r == NVML_SUCCESS) r = f.register_events(dev, nvmlEventTypeXidCriticalError, set_);
    if (r == NVML_SUCCESS) {
      devices_[i] = dev;
    } else if (on_error_) {
      on_error_("GPU " + std::to_string(i) + ": XID events: " + nvml_.error(r));
    }
  }
}

XidWatcher::~XidWatcher() {
  if (set_ != nullptr && nvml_.fn().event_set_free != nullptr) nvml_.fn().event_set_free(set_);
}

std::vector<XidEvent> XidWatcher::wait(std::chrono::milliseconds timeout) {
  std::vector<XidEvent> events;
  if (set_ == nullptr) {
    std::this_thread::sleep_for(timeout);
    return events;
  }
  auto wait_ms = static_cast<unsigned int>(std::max<long long>(0, timeout.count()));
  for (;;) {
    nvmlEventData_t data{};
    const nvmlReturn_t r = nvml_.fn().event_set_wait(set_, &data, wait_ms);
    if (r == NVML_ERROR_TIMEOUT) break;
    if (r != NVML_SUCCESS) {
      if (on_error_) on_error_("waiting for XID events: " + nvml_.error(r));
      // Do not spin on a broken event set: the caller still gets its pause.
      if (events.empty()) std::this_thread::sleep_for(timeout);
      break;
    }
    auto it = std::find(devices_.begin(), devices_.end(), data.device);
    const int gpu = it == devices_.end() || data.device == nullptr
                        ? -1
                        : static_cast<int>(it - devices_.begin());
    events.push_back({gpu, data.eventData});
    wait_ms = 0;  // take what is queued, then return
  }
  return events;
}

}  // namespace gapless::agent
