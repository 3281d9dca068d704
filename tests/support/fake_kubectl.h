// A fake `kubectl` for kubectl-gapless's port-forward (gapless/cli/port_forward.h): a shell
// script a test writes into its temporary directory and names in KUBECTL. It records the
// arguments it got (one a line) and its pid, then runs the test's `body`: print kubectl's
// "Forwarding from" line and sleep until killed, fail as kubectl does, or say nothing.
#pragma once

#include <signal.h>
#include <sys/stat.h>

#include <cerrno>
#include <fstream>
#include <string>
#include <vector>

#include "temp_dir.h"

namespace gapless::test {

class FakeKubectl {
 public:
  FakeKubectl(const TempDir& dir, const std::string& body)
      : args_file_(dir.file("kubectl.args")), pid_file_(dir.file("kubectl.pid")) {
    path_ =
        dir.write("kubectl", "#!/bin/sh\necho $$ > '" + pid_file_ + "'\nprintf '%s\\n' \"$@\" > '" +
                                 args_file_ + "'\n" + body + "\n");
    chmod(path_.c_str(), 0755);
  }
  // `exec` keeps the pid: SIGTERM to the script's pid ends the sleep itself.
  static std::string forwarding_to(int port) {
    return "echo 'Forwarding from 127.0.0.1:" + std::to_string(port) + " -> 8888'\nexec sleep 600";
  }
  ~FakeKubectl() {
    if (const int pid = this->pid(); pid > 0 && running()) kill(pid, SIGKILL);  // a failed test
  }

  const std::string& path() const { return path_; }
  std::string env() const { return "KUBECTL=" + path_ + " "; }  // a prefix for run_command

  std::vector<std::string> args() const {
    std::vector<std::string> out;
    std::ifstream in(args_file_);
    for (std::string line; std::getline(in, line);) out.push_back(line);
    return out;
  }
  int pid() const {
    std::ifstream in(pid_file_);
    int pid = -1;
    in >> pid;
    return pid;
  }
  // Whether the process the script became still exists (the plugin reaps what it ends, so an
  // ended one is gone, not a zombie).
  bool running() const {
    const int p = pid();
    return p > 0 && (kill(p, 0) == 0 || errno != ESRCH);
  }

 private:
  std::string path_, args_file_, pid_file_;
};

}  // namespace gapless::test
