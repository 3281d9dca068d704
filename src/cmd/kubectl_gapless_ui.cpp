#include "kubectl_gapless_ui.h"

#include <httplib.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <thread>

extern char** environ;

namespace gapless::cli {

namespace {

// The extender's Content-Type does not survive every proxy; the page's files are named for it.
std::string content_type_of(const std::string& path) {
  auto ends = [&path](const char* suffix) {
    const std::string s = suffix;
    return path.size() >= s.size() && path.compare(path.size() - s.size(), s.size(), s) == 0;
  };
  if (path == "/ui/" || ends(".html")) return "text/html; charset=utf-8";
  if (ends(".js")) return "text/javascript; charset=utf-8";
  if (ends(".css")) return "text/css; charset=utf-8";
  return "application/json";
}

bool split_listen(const std::string& listen, std::string* host, int* port) {
  const std::size_t colon = listen.rfind(':');
  if (colon == std::string::npos || colon == 0) return false;
  *host = listen.substr(0, colon);
  try {
    std::size_t used = 0;
    *port = std::stoi(listen.substr(colon + 1), &used);
    return used == listen.size() - colon - 1 && *port >= 0 && *port <= 65535;
  } catch (const std::exception&) {
    return false;
  }
}

}  // namespace

bool open_url(const std::string& opener, const std::string& url) {
  if (opener.empty()) return true;
  pid_t pid = 0;
  char* argv[] = {const_cast<char*>(opener.c_str()), const_cast<char*>(url.c_str()), nullptr};
  return posix_spawnp(&pid, opener.c_str(), nullptr, nullptr, argv, environ) == 0;
}

int serve_ui(const std::string& listen, const FetchFn& fetch, const std::string& opener) {
  std::string host;
  int port = 0;
  if (!split_listen(listen, &host, &port)) {
    std::fprintf(stderr, "kubectl-gapless: --listen %s: must be HOST:PORT\n", listen.c_str());
    return 2;
  }
  // Signals are taken by sigwait below, never by a handler: the server stops cleanly.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  httplib::Server server;
  server.Get(R"(/ui(/.*)?)", [&fetch](const httplib::Request& req, httplib::Response& res) {
    if (req.path == "/ui") {
      res.status = 301;
      res.set_header("Location", "ui/");
      return;
    }
    auto answer = fetch(req.path);
    if (!answer) {
      res.status = 502;
      res.set_content(nlohmann::json{{"Error", answer.error()}}.dump(), "application/json");
      return;
    }
    res.status = answer->first;
    res.set_header("Cache-Control", "no-store");
    res.set_content(answer->second, content_type_of(req.path));
  });
  const int bound =
      port == 0 ? server.bind_to_any_port(host) : (server.bind_to_port(host, port) ? port : -1);
  if (bound < 0) {
    std::fprintf(stderr, "kubectl-gapless: cannot listen on %s\n", listen.c_str());
    return 1;
  }
  std::thread serving([&server] { server.listen_after_bind(); });
  const std::string url = "http://" + host + ":" + std::to_string(bound) + "/ui/";
  std::printf("%s\n", url.c_str());
  std::fflush(stdout);
  std::fprintf(stderr, "kubectl-gapless: the GPU map is at %s (Ctrl-C to stop)\n", url.c_str());
  if (!open_url(opener, url)) {
    std::fprintf(stderr, "kubectl-gapless: could not run %s; open the URL yourself\n",
                 opener.c_str());
  }
  int sig = 0;
  sigwait(&stop_signals, &sig);
  server.stop();
  serving.join();
  return 0;
}

}  // namespace gapless::cli
