// gapless-agent as a child process for the tests that run the binary: started with the fake
// NVML configured by `nvml_config`, its stderr in a file.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace gapless::test {

// Forks and execs GAPLESS_AGENT_BINARY with `args`. Returns the child's pid (-1: fork failed).
inline pid_t spawn_agent(std::vector<std::string> args, const std::string& nvml_config,
                         const std::string& stderr_path) {
  args.insert(args.begin(), GAPLESS_AGENT_BINARY);
  const pid_t pid = fork();
  if (pid != 0) return pid;
  setenv("GAPLESS_FAKE_NVML_CONFIG", nvml_config.c_str(), 1);
  if (std::freopen(stderr_path.c_str(), "w", stderr) == nullptr) _exit(127);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  execv(argv[0], argv.data());
  _exit(127);
}

// SIGTERM, then waits. Returns the wait status (-1: waitpid failed).
inline int stop_agent(pid_t pid) {
  kill(pid, SIGTERM);
  int status = 0;
  return waitpid(pid, &status, 0) == pid ? status : -1;
}

}  // namespace gapless::test
