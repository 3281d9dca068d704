#include "wait_ready.h"

#include <httplib.h>

#include <chrono>
#include <cstdio>
#include <thread>

#include "listen_address.h"

namespace gapless::cmd {

namespace {

// The address to ask: --listen's host, a wildcard made loopback. "" when --listen is malformed.
std::string local_url(const std::string& listen) {
  std::string host;
  int port = 0;
  if (!split_listen(listen, &host, &port) || host.empty()) return "";
  if (host == "0.0.0.0") host = "127.0.0.1";
  if (host == "::") host = "::1";
  if (host.find(':') != std::string::npos) host = "[" + host + "]";
  return "http://" + host + ":" + std::to_string(port);
}

}  // namespace

int wait_ready(const std::string& listen, int seconds) {
  const std::string url = local_url(listen);
  if (url.empty()) {
    std::fprintf(stderr, "--wait-ready: --listen \"%s\" is not HOST:PORT\n", listen.c_str());
    return 1;
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  std::string last = "no answer yet";
  for (;;) {
    httplib::Client client(url);
    client.set_connection_timeout(1);
    client.set_read_timeout(2);
    if (auto res = client.Get("/readyz")) {
      if (res->status == 200) {
        std::printf("%s/readyz: ready\n", url.c_str());
        return 0;
      }
      last = "HTTP " + std::to_string(res->status);
    } else {
      last = httplib::to_string(res.error());
    }
    if (std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  std::fprintf(stderr, "--wait-ready: %s/readyz not ready after %d s (%s)\n", url.c_str(), seconds,
               last.c_str());
  return 1;
}

}  // namespace gapless::cmd
