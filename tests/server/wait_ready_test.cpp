// gapless-extender --wait-ready: the Deployment's postStart hook that holds kube-scheduler (the
// pod's next container, which takes the leader lease) until this pod's extender is ready.
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <string>

#include "child_process.h"
#include "run_command.h"
#include "test_paths.h"

namespace {

// A port nothing listens on right now (bound, read, released).
int unused_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  socklen_t len = sizeof addr;
  REQUIRE(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
  close(fd);
  return ntohs(addr.sin_port);
}

}  // namespace

TEST_CASE("gapless-extender --wait-ready: exits 0 once /readyz answers, 1 when it never does",
          "[server][wait-ready]") {
  const std::string bin = gapless::test::binary_dir() + "/gapless-extender";
  if (!std::filesystem::exists(bin)) {
    WARN("SKIPPED: " << bin << " is not built");
    return;
  }
  const std::string listen = "127.0.0.1:" + std::to_string(unused_port());

  // Nothing listens: not ready within the time given.
  auto none = gapless::test::run_command("'" + bin + "' --listen=" + listen +
                                         " --wait-ready=1 2>&1");
  INFO(none.out);
  CHECK(none.status == 1);
  CHECK(none.out.find("not ready after 1 s") != std::string::npos);

  // The demo extender (ready once it serves); the waiter may start before it listens.
  const pid_t server = gapless::test::spawn({bin, "--listen=" + listen});
  auto ready = gapless::test::run_command("'" + bin + "' --listen=" + listen +
                                          " --wait-ready=30 2>&1");
  kill(server, SIGTERM);
  waitpid(server, nullptr, 0);
  INFO(ready.out);
  CHECK(ready.status == 0);
  CHECK(ready.out.find("/readyz: ready") != std::string::npos);

  // A wildcard --listen, as a pod's, is asked on loopback; a malformed one is refused.
  auto bad = gapless::test::run_command("'" + bin + "' --listen=nohost --wait-ready=1 2>&1");
  CHECK(bad.status == 1);
  CHECK(bad.out.find("is not HOST:PORT") != std::string::npos);
}
