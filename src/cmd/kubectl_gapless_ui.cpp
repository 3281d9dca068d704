#include "kubectl_gapless_ui.h"

#include <signal.h>
#include <spawn.h>

#include <cstdio>

#include "listen_address.h"

extern char** environ;

namespace gapless::cli {

std::string forward_failed(const std::string& error) {
  return error +
         "\n(kubectl gapless reaches the extender with kubectl port-forward: it needs `create` on "
         "pods/portforward in gapless-system; or give --extender URL)";
}

bool open_url(const std::string& opener, const std::string& url) {
  if (opener.empty()) return true;
  pid_t pid = 0;
  char* argv[] = {const_cast<char*>(opener.c_str()), const_cast<char*>(url.c_str()), nullptr};
  return posix_spawnp(&pid, opener.c_str(), nullptr, nullptr, argv, environ) == 0;
}

int forward_ui(PortForwardSpec spec, const std::string& listen, const std::string& opener) {
  if (!cmd::split_listen(listen, &spec.address, &spec.local_port) || spec.address.empty()) {
    std::fprintf(stderr, "kubectl-gapless: --listen %s: must be HOST:PORT\n", listen.c_str());
    return 2;
  }
  // Blocked before kubectl and the forward's thread start, so sigwait below takes them (the
  // forward then ends in PortForward's destructor) and SIGCHLD, kubectl's end, is not lost.
  sigset_t signals;
  sigemptyset(&signals);
  for (int sig : {SIGINT, SIGTERM, SIGCHLD}) sigaddset(&signals, sig);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  auto forward = PortForward::start(spec);
  if (!forward) {
    std::fprintf(stderr, "kubectl-gapless: %s\n", forward_failed(forward.error()).c_str());
    return 1;
  }
  const std::string url = (*forward)->url() + "/ui/";
  std::printf("%s\n", url.c_str());
  std::fflush(stdout);
  std::fprintf(stderr, "kubectl-gapless: the GPU map is at %s (Ctrl-C to stop)\n", url.c_str());
  if (!open_url(opener, url)) {
    std::fprintf(stderr, "kubectl-gapless: could not run %s; open the URL yourself\n",
                 opener.c_str());
  }
  while (!(*forward)->ended()) {
    int sig = 0;
    sigwait(&signals, &sig);
    if (sig != SIGCHLD) return 0;  // SIGCHLD: kubectl, or the opener, ended: check which
  }
  const std::string how = (*forward)->how_ended();
  forward->reset();  // copies what kubectl said last to stderr, before our line
  std::fprintf(stderr, "kubectl-gapless: kubectl port-forward ended (%s)\n", how.c_str());
  return 1;
}

}  // namespace gapless::cli
