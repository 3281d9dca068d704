// gapless-extender --wait-ready: the Deployment's postStart hook that holds kube-scheduler (the
// pod's next container, which takes the leader lease) until this pod's extender is ready.
#include <signal.h>
#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <string>
#include <vector>

#include "child_process.h"
#include "run_command.h"
#include "test_paths.h"
#include "unused_port.h"

using gapless::test::unused_port;

TEST_CASE("gapless-extender --wait-ready: exits 0 once /readyz answers, 1 when it never does",
          "[server][wait-ready]") {
  const std::string bin = gapless::test::binary_dir() + "/gapless-extender";
  if (!std::filesystem::exists(bin)) {
    WARN("SKIPPED: " << bin << " is not built");
    return;
  }
  const std::string listen = "127.0.0.1:" + std::to_string(unused_port());

  // Nothing listens: not ready within the time given.
  auto none =
      gapless::test::run_command("'" + bin + "' --listen=" + listen + " --wait-ready=1 2>&1");
  INFO(none.out);
  CHECK(none.status == 1);
  CHECK(none.out.find("not ready after 1 s") != std::string::npos);

  // Runs the demo extender with `serve` flags and, beside it, the waiter with `wait` flags.
  auto wait_beside = [&](std::vector<std::string> serve, const std::string& wait) {
    serve.insert(serve.begin(), bin);
    const pid_t server = gapless::test::spawn(serve);
    auto waited = gapless::test::run_command("'" + bin + "' " + wait + " --wait-ready=30 2>&1");
    kill(server, SIGTERM);
    waitpid(server, nullptr, 0);
    return waited;
  };
  // The demo extender is ready once it serves; the waiter may start before it listens.
  auto ready = wait_beside({"--listen=" + listen}, "--listen=" + listen);
  INFO(ready.out);
  CHECK(ready.status == 0);
  CHECK(ready.out.find("/readyz: ready") != std::string::npos);

  // The Deployment's hook: the probe listener, a wildcard address asked on loopback.
  const std::string probe_port = std::to_string(unused_port());
  auto hook = wait_beside({"--listen=127.0.0.1:" + std::to_string(unused_port()),
                           "--probe-listen=127.0.0.1:" + probe_port},
                          "--probe-listen=0.0.0.0:" + probe_port);
  INFO(hook.out);
  CHECK(hook.status == 0);
  CHECK(hook.out.find("http://127.0.0.1:" + probe_port + "/readyz: ready") != std::string::npos);

  // A malformed --listen is refused.
  auto bad = gapless::test::run_command("'" + bin + "' --listen=nohost --wait-ready=1 2>&1");
  CHECK(bad.status == 1);
  CHECK(bad.out.find("is not HOST:PORT") != std::string::npos);
}
