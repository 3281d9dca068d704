// Keeps the extender's policy in step with its file: reload on SIGHUP (reload_now) and when the
// file's modification time or size changes. An invalid new file is logged and ignored; the old
// policy stays in force.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
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

  // Reloads now; returns true if the new policy was installed.
  bool reload_now();

 private:
  void run();
  std::string stamp() const;

  Extender& extender_;
  Metrics& metrics_;
  const std::string path_;
  const std::chrono::milliseconds poll_;
  std::string last_stamp_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace gapless::server
