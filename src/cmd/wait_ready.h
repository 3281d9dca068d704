// `gapless-extender --wait-ready SECONDS`: waits until the extender of this pod answers /readyz
// with 200, then exits 0 (1 after SECONDS without it).
//
// Why: the shipped Deployment runs kube-scheduler beside the extender, and kube-scheduler takes
// the leader lease as soon as it starts, whether or not its extender has a model yet. A replica
// that took the lease with an unready extender answers every pod with an Error until its model
// is built, while the warm standby could have scheduled them. The extender is the pod's first
// container and runs this as its postStart hook: the kubelet starts the next container
// (kube-scheduler) only once the hook returns, so kube-scheduler cannot take the lease before
// its extender is ready.
#pragma once

#include <string>

namespace gapless::cmd {

// `listen` is the extender's --listen HOST:PORT; a wildcard host (0.0.0.0, [::]) is asked on
// the matching loopback address. Polls every 200 ms; returns the process exit status.
int wait_ready(const std::string& listen, int seconds);

}  // namespace gapless::cmd
