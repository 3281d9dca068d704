// gapless-agent as a child process for the tests that run the binary: started with the fake
// NVML configured by `nvml_config`, its stderr in a file.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "child_process.h"

namespace gapless::test {

// Starts GAPLESS_AGENT_BINARY with `args` (posix_spawn: the tests run server threads, see
// child_process.h). Returns the child's pid.
inline pid_t spawn_agent(std::vector<std::string> args, const std::string& nvml_config,
                         const std::string& stderr_path) {
  args.insert(args.begin(), GAPLESS_AGENT_BINARY);
  SpawnOptions options;
  options.extra_env = {"GAPLESS_FAKE_NVML_CONFIG=" + nvml_config};
  options.stderr_path = stderr_path;
  return spawn(args, options);
}

// SIGTERM, then waits. Returns the wait status (-1: waitpid failed).
inline int stop_agent(pid_t pid) {
  kill(pid, SIGTERM);
  int status = 0;
  return waitpid(pid, &status, 0) == pid ? status : -1;
}

}  // namespace gapless::test
