// Keeps the extender's policy in step with its file: reload on SIGHUP (request_reload) and when
// the file's content changes. An invalid new file is logged and ignored; the old policy stays in
// force.
//
// Changes are detected by a hash of the content, polled every `poll`: a ConfigMap update swaps a
// symlink to a file that may have the same size and modification time. The file is read with
// policy::read_policy_text, which never blocks: a FIFO or device at the path is refused with a
// logged error instead of stalling the watcher (or, on SIGHUP, the signal thread).
// Thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <string>
#include <thread>

#include "gapless/server/extender.h"
#include "gapless/server/metrics.h"

namespace gapless::server {

class PolicyWatch {
 public:
  PolicyWatch(Extender& extender, Metrics& metrics, std::string path,
              std::chrono::milliseconds poll = std::chrono::seconds(2));
  ~PolicyWatch();  // stops the polling thread
  PolicyWatch(const PolicyWatch&) = delete;
  PolicyWatch& operator=(const PolicyWatch&) = delete;

  // Reloads now, on the calling thread; returns true if the new policy was installed.
  bool reload_now();
  // Asks the polling thread to reload soon and returns at once (safe from a signal thread).
  void request_reload();

 private:
  void run();
  // Installs the file's policy if its content differs from the last one seen (or `force`).
  bool reload(bool force);

  Extender& extender_;
  Metrics& metrics_;
  const std::string path_;
  const std::chrono::milliseconds poll_;
  std::mutex reload_mu_;      // one reload at a time; guards last_content_
  std::size_t last_content_;  // hash of the content last seen, or of the last read error
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  bool reload_requested_ = false;
  std::thread thread_;
};

}  // namespace gapless::server
