// HOST:PORT as the command-line tools' --listen and --probe-listen flags take it.
#pragma once

#include <string>

namespace gapless::cmd {

// Splits at the last colon; a bracketed IPv6 host ("[::1]:8888") loses its brackets; PORT is
// 0..65535 and nothing else. The host may be empty (":8888"): callers that need one check it.
inline bool split_listen(const std::string& listen, std::string* host, int* port) {
  const auto colon = listen.rfind(':');
  if (colon == std::string::npos) return false;
  *host = listen.substr(0, colon);
  if (host->size() >= 2 && host->front() == '[' && host->back() == ']') {
    *host = host->substr(1, host->size() - 2);
  }
  try {
    std::size_t used = 0;
    *port = std::stoi(listen.substr(colon + 1), &used);
    return used == listen.size() - colon - 1 && *port >= 0 && *port <= 65535;
  } catch (...) {
    return false;
  }
}

}  // namespace gapless::cmd
