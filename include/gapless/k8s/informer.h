// List + watch of one resource (nodes or pods), as client-go's reflector does it: list in chunks,
// watch from the list's resourceVersion with bookmarks, resume from the last resourceVersion seen
// when a watch ends, and relist when the server says 410 Gone. Reconnects with capped
// exponential backoff.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gapless/k8s/api_client.h"

namespace gapless::k8s {

struct InformerHandlers {
  // A full, consistent list: the receiver replaces everything it knows of this resource
  // (objects it knew and that are absent were deleted while we were not watching).
  std::function<void(const std::vector<nlohmann::json>& items)> on_list;
  // One watch event: type is "ADDED", "MODIFIED" or "DELETED".
  std::function<void(const std::string& type, const nlohmann::json& object)> on_event;
  // Errors worth a log line (transport failures, unexpected statuses); optional.
  std::function<void(const std::string& message)> on_error;
};

struct InformerOptions {
  std::string path;            // "/api/v1/nodes" or "/api/v1/pods"
  std::string field_selector;  // e.g. "status.phase!=Succeeded,status.phase!=Failed" (unencoded)
  int page_size = 500;
  int watch_timeout_seconds = 300;
  std::chrono::milliseconds backoff_initial{200};
  std::chrono::milliseconds backoff_max{30000};
};

class Informer {
 public:
  Informer(ApiTransport& api, InformerOptions options, InformerHandlers handlers);
  Informer(const Informer&) = delete;
  Informer& operator=(const Informer&) = delete;

  // Lists and watches until stop(). Blocking; run it on its own thread.
  void run();
  // Makes run() return soon (at the latest when the current watch times out).
  void stop();
  // True once the first full list has been delivered.
  bool synced() const { return synced_.load(); }
  // The resourceVersion the next watch would start from (tests, /debug).
  std::string resource_version() const;

 private:
  enum class Outcome { kOk, kGone, kFailed };
  // One full (chunked) list, delivered to on_list; sets rv_ and synced_.
  Outcome list(std::string* error);
  // One watch from rv_; `events` counts the values the stream delivered.
  Outcome watch(std::string* error, std::size_t* events);
  // Sleeps `d` or until stop().
  void sleep_for(std::chrono::milliseconds d);
  void set_resource_version(std::string rv);
  void report(const std::string& message) const;

  ApiTransport& api_;
  const InformerOptions options_;
  const InformerHandlers handlers_;
  std::atomic<bool> synced_{false};
  std::atomic<bool> stopping_{false};
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::string rv_;
};

}  // namespace gapless::k8s
