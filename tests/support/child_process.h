// Starting a child process from a test that already runs server threads. fork() there is unsafe:
// the child inherits malloc's and stdio's locks in whatever state the other threads left them,
// so allocating before exec can deadlock it forever (and a parent reading its pipe with it).
// posix_spawn does the redirections and exec without running the parent's code in between.
#pragma once

#include <fcntl.h>
#include <spawn.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <string>
#include <vector>

extern char** environ;

namespace gapless::test {

struct SpawnOptions {
  std::vector<std::string> extra_env;  // "NAME=value", added to (and overriding) the test's own
  int stdout_fd = -1;                  // the child's stdout (dup2'd); -1: the test's
  std::string stderr_path;             // the child's stderr, truncated; empty: the test's
};

// Starts argv[0] (a path, not searched) with `argv`. Returns the child's pid; fails the test if
// it cannot start.
inline pid_t spawn(std::vector<std::string> argv, const SpawnOptions& options = {}) {
  std::vector<std::string> env_strings = options.extra_env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    const std::string name = entry.substr(0, entry.find('=') + 1);
    bool overridden = false;
    for (const auto& extra : options.extra_env) overridden |= extra.rfind(name, 0) == 0;
    if (!overridden) env_strings.push_back(entry);
  }
  auto pointers = [](std::vector<std::string>& strings) {
    std::vector<char*> p;
    for (auto& s : strings) p.push_back(s.data());
    p.push_back(nullptr);
    return p;
  };
  std::vector<char*> arg_pointers = pointers(argv);
  std::vector<char*> env_pointers = pointers(env_strings);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (options.stdout_fd >= 0) posix_spawn_file_actions_adddup2(&actions, options.stdout_fd, 1);
  if (!options.stderr_path.empty()) {
    posix_spawn_file_actions_addopen(&actions, 2, options.stderr_path.c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
  }
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, arg_pointers[0], &actions, nullptr, arg_pointers.data(),
                             env_pointers.data());
  posix_spawn_file_actions_destroy(&actions);
  INFO(argv[0]);
  REQUIRE(rc == 0);
  return pid;
}

}  // namespace gapless::test
