// The bearer token of an ApiClient: fixed, or re-read from a file, because projected
// service-account tokens rotate (extender-protocol.md §4.1). Private to src/k8s.
#pragma once

#include <chrono>
#include <mutex>
#include <string>

namespace gapless::k8s {

// `s` without leading and trailing whitespace.
std::string trim_whitespace(std::string s);

// Thread-safe.
class TokenSource {
 public:
  // With a file, the file wins over `token` (which is used only while the file is unreadable).
  TokenSource(std::string token, std::string file);

  // The token, re-reading the file when the copy is older than max_age (client-go's cached
  // file token source uses one minute).
  std::string get();
  // Re-reads the file now (after a 401) and returns the token.
  std::string reload();

  std::chrono::steady_clock::duration max_age = std::chrono::minutes(1);

 private:
  void read_locked();

  std::mutex mu_;
  std::string token_;
  const std::string file_;
  bool read_ = false;
  std::chrono::steady_clock::time_point read_at_;
};

}  // namespace gapless::k8s
