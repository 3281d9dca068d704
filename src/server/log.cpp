#include "gapless/server/log.h"

#include <chrono>
#include <cstdio>
#include <ctime>
#include <mutex>
#include <string>

namespace gapless::server {

void log(LogLevel level, std::string_view message) {
  static std::mutex mu;
  const auto now = std::chrono::system_clock::now();
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char ts[32];
  std::strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%SZ", &tm);
  const char* lv = level == LogLevel::kInfo ? "INFO" : level == LogLevel::kWarn ? "WARN" : "ERROR";
  std::lock_guard lock(mu);
  std::fprintf(stderr, "%s %s %.*s\n", ts, lv, static_cast<int>(message.size()), message.data());
}

}  // namespace gapless::server
