// The node agent's share over-use marks (the gapless.io/share-overuse annotation on pods,
// agent/usage_report.h), by pod UID, as the pod informer sees them: what the GPU map shows.
// Thread-safe.
#pragma once

#include <cstddef>
#include <mutex>
#include <string>
#include <unordered_map>

namespace gapless::server {

class ShareOveruseMarks {
 public:
  // A mark longer than this is not kept (the annotation is the agent's, but any client can
  // write one).
  static constexpr std::size_t kMaxMarkBytes = 4096;

  // Records the pod's mark; "" forgets it.
  void note(const std::string& uid, const std::string& mark) {
    std::lock_guard lock(mu_);
    if (mark.empty() || mark.size() > kMaxMarkBytes) {
      marks_.erase(uid);
    } else {
      marks_[uid] = mark;
    }
  }
  // The pod's mark, or "".
  std::string find(const std::string& uid) const {
    std::lock_guard lock(mu_);
    auto it = marks_.find(uid);
    return it == marks_.end() ? std::string() : it->second;
  }
  bool empty() const {
    std::lock_guard lock(mu_);
    return marks_.empty();
  }

 private:
  mutable std::mutex mu_;
  std::unordered_map<std::string, std::string> marks_;
};

}  // namespace gapless::server
