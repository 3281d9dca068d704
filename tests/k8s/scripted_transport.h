// An in-memory ApiTransport for informer, sync and binder tests: call() and watch() answer from
// two queues of canned responses, and every request is recorded.
//
// call() with an empty queue fails at once ("unscripted"). watch() with an empty queue blocks
// until a script is pushed or close() is called (then it returns 200), so an informer that has
// consumed its script simply waits, with its next watch URL already recorded.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "eventually.h"
#include "gapless/k8s/api_client.h"

namespace gapless::k8s::testing {

struct Request {
  std::string kind;  // "call" or "watch"
  std::string method;
  std::string path;
  std::string body;
};

struct WatchScript {
  std::vector<nlohmann::json> events;
  int status = 200;                            // returned after the events
  std::optional<std::string> transport_error;  // instead of a status
  // Keeps sending bookmarks (resourceVersion "tick") until on_event returns false or close().
  bool endless = false;
};

// A watch that delivers `events`, then ends normally.
inline WatchScript stream(std::vector<nlohmann::json> events) {
  WatchScript w;
  w.events = std::move(events);
  return w;
}

class ScriptedTransport final : public ApiTransport {
 public:
  void push_call(int status, std::string body) {
    std::lock_guard lock(mu_);
    calls_.push_back(ApiResponse{status, std::move(body)});
  }
  void push_call(const nlohmann::json& body) { push_call(200, body.dump()); }
  void push_call_error(std::string message) {
    std::lock_guard lock(mu_);
    calls_.push_back(Error{std::move(message)});
  }
  void push_watch(WatchScript script) {
    {
      std::lock_guard lock(mu_);
      watches_.push_back(std::move(script));
    }
    cv_.notify_all();
  }
  // Ends blocked and future watches (status 200).
  void close() {
    {
      std::lock_guard lock(mu_);
      closed_ = true;
    }
    cv_.notify_all();
  }

  std::vector<Request> requests() const {
    std::lock_guard lock(mu_);
    return requests_;
  }
  std::vector<Request> requests_of(const std::string& kind) const {
    std::vector<Request> out;
    for (Request& r : requests()) {
      if (r.kind == kind) out.push_back(std::move(r));
    }
    return out;
  }
  std::size_t pending_calls() const {
    std::lock_guard lock(mu_);
    return calls_.size();
  }

  Result<ApiResponse> call(const std::string& method, const std::string& path,
                           const std::string& body, const std::string&) override {
    std::lock_guard lock(mu_);
    requests_.push_back({"call", method, path, body});
    if (calls_.empty()) return Error{"unscripted call " + method + " " + path};
    Result<ApiResponse> r = std::move(calls_.front());
    calls_.pop_front();
    return r;
  }

  Result<int> watch(const std::string& path,
                    const std::function<bool(const nlohmann::json&)>& on_event) override {
    WatchScript script;
    {
      std::unique_lock lock(mu_);
      requests_.push_back({"watch", "GET", path, ""});
      cv_.wait(lock, [&] { return closed_ || !watches_.empty(); });
      if (watches_.empty()) return 200;
      script = std::move(watches_.front());
      watches_.pop_front();
    }
    for (const nlohmann::json& e : script.events) {
      if (!on_event(e)) return 200;
    }
    while (script.endless) {
      if (is_closed()) return 200;
      nlohmann::json tick = {{"type", "BOOKMARK"},
                             {"object", {{"metadata", {{"resourceVersion", "tick"}}}}}};
      if (!on_event(tick)) return 200;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    if (script.transport_error) return Error{*script.transport_error};
    return script.status;
  }

 private:
  bool is_closed() const {
    std::lock_guard lock(mu_);
    return closed_;
  }

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Result<ApiResponse>> calls_;
  std::deque<WatchScript> watches_;
  std::vector<Request> requests_;
  bool closed_ = false;
};

using gapless::test::eventually;

// A watch event {"type": type, "object": object}.
inline nlohmann::json event(const std::string& type, const nlohmann::json& object) {
  return {{"type", type}, {"object", object}};
}

// A list page: {"kind":"List","metadata":{"resourceVersion":rv,"continue":cont},"items":items}.
// A single object is a one-element list: list_page(rv, {obj}) reads as the object itself under
// clang (nlohmann's one-element initializer lists), as a list under gcc.
inline nlohmann::json list_page(const std::string& rv, nlohmann::json items,
                                const std::string& cont = "") {
  if (items.is_object()) items = nlohmann::json::array({items});
  nlohmann::json meta = {{"resourceVersion", rv}};
  if (!cont.empty()) meta["continue"] = cont;
  return {{"kind", "List"}, {"apiVersion", "v1"}, {"metadata", meta}, {"items", std::move(items)}};
}

}  // namespace gapless::k8s::testing
