#include "gapless/server/policy_watch.h"

#include <sys/stat.h>

#include "gapless/policy/loader.h"
#include "gapless/server/log.h"

namespace gapless::server {

PolicyWatch::PolicyWatch(Extender& extender, Metrics& metrics, std::string path,
                         std::chrono::milliseconds poll)
    : extender_(extender), metrics_(metrics), path_(std::move(path)), poll_(poll) {
  last_stamp_ = stamp();
  thread_ = std::thread([this] { run(); });
}

PolicyWatch::~PolicyWatch() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

// Modification time (ns) and size: cheap, and catches ConfigMap symlink swaps too (stat follows).
std::string PolicyWatch::stamp() const {
  struct stat st {};
  if (::stat(path_.c_str(), &st) != 0) return "missing";
  return std::to_string(st.st_mtim.tv_sec) + "." + std::to_string(st.st_mtim.tv_nsec) + "/" +
         std::to_string(st.st_size);
}

bool PolicyWatch::reload_now() {
  auto loaded = policy::load_policy_file(path_);
  metrics_.count_policy_reload(loaded.ok());
  if (!loaded) {
    log_error("policy reload failed, keeping the previous policy: " + loaded.error());
    return false;
  }
  extender_.set_policy(std::move(*loaded));
  log_info("policy reloaded from " + path_);
  return true;
}

void PolicyWatch::run() {
  std::unique_lock lock(mu_);
  while (!cv_.wait_for(lock, poll_, [this] { return stopping_; })) {
    const std::string now = stamp();
    if (now == last_stamp_) continue;
    last_stamp_ = now;
    lock.unlock();
    reload_now();
    lock.lock();
  }
}

}  // namespace gapless::server
