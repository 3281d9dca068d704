// How `kubectl gapless` reaches the extender without --extender: `kubectl port-forward` to the
// extender's loopback port in its pod, run as a child process. The port-forward carries the
// user's own identity and authorization (RBAC `create` on `pods/portforward` in gapless-system),
// which the API server's service proxy could not, so /debug/* and /ui/ can stay on the pod's
// loopback (docs/explain.md).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "gapless/model/result.h"

namespace gapless::cli {

struct PortForwardSpec {
  std::string kubectl = "kubectl";  // a path, or a name searched on PATH
  std::string kubeconfig, context;  // passed to kubectl when set
  std::string ns = "gapless-system";
  std::string target = "deploy/gapless-scheduler";  // kubectl picks a Running pod of it
  std::string address = "127.0.0.1";                // where the local end listens
  int local_port = 0;                               // 0: kubectl picks a free one
  int remote_port = 8888;                           // the extender's loopback listener
  std::chrono::milliseconds ready_timeout{15000};   // for the "Forwarding from" line
};

// kubectl's arguments (without argv[0]) for `spec`.
std::vector<std::string> port_forward_args(const PortForwardSpec& spec);

// The local address ("127.0.0.1:41234", "[::1]:41234") of one of kubectl's lines
// "Forwarding from ADDRESS -> REMOTE_PORT"; nullopt for any other line.
std::optional<std::string> forwarded_address(const std::string& line, int remote_port);

// A running `kubectl port-forward`. The destructor ends it (SIGTERM, then SIGKILL if it lingers)
// and reaps it; if the plugin itself is killed, the kernel sends kubectl SIGTERM
// (PR_SET_PDEATHSIG), so no exit path leaves it behind. Not thread-safe: one owner.
class PortForward {
 public:
  // Starts kubectl and waits for its "Forwarding from" line, at most spec.ready_timeout. An
  // error (kubectl missing, exited, or silent too long) quotes what kubectl wrote on stderr.
  // After that, kubectl's stdout is drained and its stderr copied to the plugin's stderr.
  static Result<std::unique_ptr<PortForward>> start(const PortForwardSpec& spec);
  ~PortForward();
  PortForward(const PortForward&) = delete;
  PortForward& operator=(const PortForward&) = delete;

  const std::string& url() const { return url_; }  // "http://127.0.0.1:41234"
  pid_t pid() const { return pid_; }
  // Whether kubectl has ended (reaps it without waiting); then `how_ended` says how
  // ("exit status 1"). What it wrote on stderr reaches the plugin's stderr by the destructor.
  bool ended();
  std::string how_ended() const;

 private:
  PortForward() = default;
  Status wait_for_line(const PortForwardSpec& spec);
  void drain();  // the thread that reads kubectl's output after the line
  void stop();

  pid_t pid_ = -1;
  int exit_status_ = -1;  // waitpid's status once reaped
  bool reaped_ = false;
  int out_ = -1, err_ = -1;  // read ends of kubectl's stdout and stderr
  int wake_[2] = {-1, -1};   // a write to wake_[1] stops the drain thread
  std::string url_;
  std::thread drainer_;
  std::string stderr_;  // the last few KiB kubectl wrote there before the line
};

}  // namespace gapless::cli
