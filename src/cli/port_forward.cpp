#include "gapless/cli/port_forward.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace gapless::cli {

namespace {

using Clock = std::chrono::steady_clock;

constexpr std::size_t kStderrKept = 4096;  // enough for kubectl's error, bounded if it chatters
constexpr std::size_t kLongestLine = 4096;

// The executable `name` stands for: itself when it holds a '/', else the first one on PATH.
std::optional<std::string> find_executable(const std::string& name) {
  if (name.find('/') != std::string::npos) {
    return access(name.c_str(), X_OK) == 0 ? std::optional(name) : std::nullopt;
  }
  const char* env = std::getenv("PATH");
  const std::string dirs = env != nullptr ? env : "/usr/local/bin:/usr/bin:/bin";
  std::size_t start = 0;
  while (start <= dirs.size()) {
    std::size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    const std::string dir = end == start ? "." : dirs.substr(start, end - start);
    const std::string candidate = dir + "/" + name;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
    start = end + 1;
  }
  return std::nullopt;
}

std::string exit_text(int status) {
  if (status < 0) return "ended";  // reaped elsewhere: how is unknown
  if (WIFEXITED(status)) return "exit status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return "killed by signal " + std::to_string(WTERMSIG(status));
  return "ended";
}

int ms_until(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return static_cast<int>(std::clamp<std::int64_t>(left.count(), 0, 60'000));
}

// Starts `path` with `args`, its stdout and stderr on the write ends `out` and `err`; -1 when
// fork fails. fork rather than posix_spawn for PR_SET_PDEATHSIG, which only the child can set;
// between fork and exec the child makes only async-signal-safe calls, as the plugin may run
// threads. The parent's blocked and ignored signals are not inherited: SIGTERM must end kubectl.
pid_t spawn_child(const std::string& path, std::vector<std::string> args, int out, int err) {
  args.insert(args.begin(), path);
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid != 0) return pid;
  prctl(PR_SET_PDEATHSIG, SIGTERM);     // the plugin's death, however it comes, ends kubectl
  if (getppid() != parent) _exit(127);  // it died before the line above
  struct sigaction default_action {};
  default_action.sa_handler = SIG_DFL;
  sigemptyset(&default_action.sa_mask);
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGPIPE}) sigaction(sig, &default_action, nullptr);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  dup2(out, STDOUT_FILENO);
  dup2(err, STDERR_FILENO);
  execv(argv[0], argv.data());
  static const char kFailed[] = "cannot execute kubectl\n";
  const ssize_t ignored = write(STDERR_FILENO, kFailed, sizeof kFailed - 1);
  (void)ignored;
  _exit(127);
}

}  // namespace

std::vector<std::string> port_forward_args(const PortForwardSpec& spec) {
  std::vector<std::string> args;
  if (!spec.kubeconfig.empty()) args.insert(args.end(), {"--kubeconfig", spec.kubeconfig});
  if (!spec.context.empty()) args.insert(args.end(), {"--context", spec.context});
  const std::string local = spec.local_port == 0 ? "" : std::to_string(spec.local_port);
  args.insert(args.end(), {"port-forward", "-n", spec.ns, "--address", spec.address, spec.target,
                           local + ":" + std::to_string(spec.remote_port)});
  return args;
}

std::optional<std::string> forwarded_address(const std::string& line, int remote_port) {
  const std::string prefix = "Forwarding from ";
  const std::string suffix = " -> " + std::to_string(remote_port);
  std::string text = line;
  if (!text.empty() && text.back() == '\r') text.pop_back();
  if (text.size() <= prefix.size() + suffix.size() || text.rfind(prefix, 0) != 0 ||
      text.compare(text.size() - suffix.size(), suffix.size(), suffix) != 0) {
    return std::nullopt;
  }
  std::string address = text.substr(prefix.size(), text.size() - prefix.size() - suffix.size());
  const std::size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == address.size() ||
      address.find_first_not_of("0123456789", colon + 1) != std::string::npos ||
      address.find_first_of(" /?#") != std::string::npos) {
    return std::nullopt;
  }
  return address;
}

Result<std::unique_ptr<PortForward>> PortForward::start(const PortForwardSpec& spec) {
  std::vector<std::string> args = port_forward_args(spec);
  const std::optional<std::string> path = find_executable(spec.kubectl);
  if (!path) return Error{"cannot find \"" + spec.kubectl + "\" (set KUBECTL to kubectl's path)"};
  std::unique_ptr<PortForward> pf(new PortForward());
  int out[2], err[2];
  if (pipe2(pf->wake_, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0) {
    return Error{std::string("pipe: ") + std::strerror(errno)};
  }
  pf->out_ = out[0];
  if (pipe2(err, O_CLOEXEC) != 0) {
    close(out[1]);
    return Error{std::string("pipe: ") + std::strerror(errno)};
  }
  pf->err_ = err[0];
  pf->pid_ = spawn_child(*path, args, out[1], err[1]);
  const int fork_errno = errno;
  close(out[1]);
  close(err[1]);
  if (pf->pid_ < 0) return Error{std::string("cannot start kubectl: ") + std::strerror(fork_errno)};
  if (Status ready = pf->wait_for_line(spec); !ready) return Error{ready.error()};
  pf->drainer_ = std::thread([raw = pf.get()] { raw->drain(); });
  return pf;
}

// Reads kubectl's stdout for the forwarding line and keeps its stderr, until spec.ready_timeout.
Status PortForward::wait_for_line(const PortForwardSpec& spec) {
  const auto deadline = Clock::now() + spec.ready_timeout;
  auto stop_at = deadline;  // shortened once stdout closes: only stderr's last words are left
  bool out_open = true, err_open = true;
  std::string line;
  char buf[4096];
  while (out_open || err_open) {
    pollfd fds[2] = {{out_open ? out_ : -1, POLLIN, 0}, {err_open ? err_ : -1, POLLIN, 0}};
    const int n = poll(fds, 2, ms_until(stop_at));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    if (fds[1].revents != 0) {
      const ssize_t got = read(err_, buf, sizeof buf);
      if (got > 0) stderr_.append(buf, static_cast<std::size_t>(got));
      if (stderr_.size() > kStderrKept) stderr_.erase(0, stderr_.size() - kStderrKept);
      err_open = got > 0;
    }
    if (fds[0].revents == 0) continue;
    const ssize_t got = read(out_, buf, sizeof buf);
    if (got <= 0) {
      out_open = false;
      stop_at = std::min(deadline, Clock::now() + std::chrono::seconds(1));
      continue;
    }
    for (ssize_t i = 0; i < got; ++i) {
      if (buf[i] != '\n') {
        if (line.size() < kLongestLine) line += buf[i];
        continue;
      }
      if (auto address = forwarded_address(line, spec.remote_port)) {
        url_ = "http://" + *address;
        return Status::Ok();
      }
      line.clear();
    }
  }
  std::string what = "kubectl";
  for (const std::string& a : port_forward_args(spec)) what += " " + a;
  if (!out_open) {  // it closed stdout: it is ending, if not ended
    const auto until = Clock::now() + std::chrono::seconds(1);
    while (!ended() && Clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::string said = stderr_;
  while (!said.empty() && std::isspace(static_cast<unsigned char>(said.back()))) said.pop_back();
  const std::string how = ended() ? "ended (" + how_ended() + ")"
                                  : "printed no \"Forwarding from\" line in " +
                                        std::to_string(spec.ready_timeout.count()) + " ms";
  return Error{"`" + what + "` " + how + (said.empty() ? "" : ": " + said)};
}

// After the line: kubectl's stdout ("Handling connection for ...") is read and dropped, so it
// never blocks on a full pipe; its stderr goes to the plugin's. On the wake-up (stop()), what is
// left in the pipes is copied too, so kubectl's last words are not lost.
void PortForward::drain() {
  char buf[4096];
  bool out_open = true, err_open = true;
  auto read_into = [&buf](int fd, bool to_stderr) {
    const ssize_t got = read(fd, buf, sizeof buf);
    if (got > 0 && to_stderr) {
      const ssize_t ignored = write(STDERR_FILENO, buf, static_cast<std::size_t>(got));
      (void)ignored;
    }
    return got > 0;
  };
  bool stopping = false;
  while (out_open || err_open) {
    pollfd fds[3] = {{out_open ? out_ : -1, POLLIN, 0},
                     {err_open ? err_ : -1, POLLIN, 0},
                     {stopping ? -1 : wake_[0], POLLIN, 0}};
    const int n = poll(fds, 3, stopping ? 0 : -1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // an error, or nothing more left once stopping
    stopping = stopping || fds[2].revents != 0;
    if (fds[0].revents != 0) out_open = read_into(out_, false);
    if (fds[1].revents != 0) err_open = read_into(err_, true);
  }
}

bool PortForward::ended() {
  if (reaped_ || pid_ <= 0) return true;
  int status = 0;
  const pid_t got = waitpid(pid_, &status, WNOHANG);
  if (got == pid_ || (got < 0 && errno == ECHILD)) {
    reaped_ = true;
    exit_status_ = got == pid_ ? status : -1;
  }
  return reaped_;
}

std::string PortForward::how_ended() const {
  return exit_text(exit_status_);
}

void PortForward::stop() {
  if (pid_ > 0 && !ended()) {
    kill(pid_, SIGTERM);
    const auto until = Clock::now() + std::chrono::seconds(3);
    while (!ended() && Clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    if (!ended()) {  // it ignored SIGTERM: no exit path may hang on it
      kill(pid_, SIGKILL);
      waitpid(pid_, &exit_status_, 0);
      reaped_ = true;
    }
  }
  if (drainer_.joinable()) {
    const ssize_t ignored = write(wake_[1], "x", 1);
    (void)ignored;
    drainer_.join();
  }
  for (int fd : {out_, err_, wake_[0], wake_[1]}) {
    if (fd >= 0) close(fd);
  }
  out_ = err_ = wake_[0] = wake_[1] = -1;
}

PortForward::~PortForward() {
  stop();
}

}  // namespace gapless::cli
