// Running one of the project's binaries from a test through the shell (popen), for tests of what
// a user types: exit status and standard output (redirect stderr in the command).
#pragma once

#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <string>

namespace gapless::test {

struct Exit {
  int status = -1;  // the exit status; -1 when the command did not exit normally
  std::string out;  // standard output
};

inline Exit run_command(const std::string& command) {
  Exit e;
  FILE* p = popen(command.c_str(), "r");
  REQUIRE(p != nullptr);
  char buf[4096];
  while (std::size_t n = std::fread(buf, 1, sizeof buf, p)) e.out.append(buf, n);
  const int rc = pclose(p);
  e.status = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  return e;
}

}  // namespace gapless::test
