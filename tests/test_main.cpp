// The suites' main. The tests are HTTP clients of servers that may close a connection while a
// client still writes (a refused 50 MB body, a refused TLS client): such a write must fail with
// EPIPE, as it does for kube-scheduler (Go ignores SIGPIPE on sockets) and for gapless-extender
// itself, not kill the test process.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#include <csignal>

int main(int argc, char* argv[]) {
  std::signal(SIGPIPE, SIG_IGN);
  return Catch::Session().run(argc, argv);
}
