#include "gapless/server/policy_watch.h"

#include <functional>

#include "gapless/policy/loader.h"
#include "gapless/server/log.h"

namespace gapless::server {

namespace {

// The content's hash, or a distinct one per read error, so a file that goes missing and comes
// back unchanged is not reloaded, while one that comes back changed is.
std::size_t content_hash(const Result<std::string>& text) {
  return text ? std::hash<std::string>{}(*text)
              : std::hash<std::string>{}("error: " + text.error());
}

}  // namespace

PolicyWatch::PolicyWatch(Extender& extender, Metrics& metrics, std::string path,
                         std::chrono::milliseconds poll)
    : extender_(extender), metrics_(metrics), path_(std::move(path)), poll_(poll) {
  last_content_ = content_hash(policy::read_policy_text(path_));
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

bool PolicyWatch::reload_now() {
  return reload(true);
}

void PolicyWatch::request_reload() {
  {
    std::lock_guard lock(mu_);
    reload_requested_ = true;
  }
  cv_.notify_all();
}

bool PolicyWatch::reload(bool force) {
  std::lock_guard lock(reload_mu_);
  auto text = policy::read_policy_text(path_);
  const std::size_t hash = content_hash(text);
  if (!force && hash == last_content_) return false;
  last_content_ = hash;
  auto loaded =
      text ? policy::parse_policy(*text, path_) : Result<placement::Policy>(Error{text.error()});
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
  for (;;) {
    cv_.wait_for(lock, poll_, [this] { return stopping_ || reload_requested_; });
    if (stopping_) return;
    const bool forced = reload_requested_;
    reload_requested_ = false;
    lock.unlock();
    reload(forced);
    lock.lock();
  }
}

}  // namespace gapless::server
