// Minimal structured logging to stderr: one line per event, "ts level message".
#pragma once

#include <string_view>

namespace gapless::server {

enum class LogLevel { kInfo, kWarn, kError };
void log(LogLevel level, std::string_view message);
inline void log_info(std::string_view m) { log(LogLevel::kInfo, m); }
inline void log_warn(std::string_view m) { log(LogLevel::kWarn, m); }
inline void log_error(std::string_view m) { log(LogLevel::kError, m); }

}  // namespace gapless::server
