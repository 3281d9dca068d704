// The Kubernetes binder: POST /api/v1/namespaces/{ns}/pods/{name}/binding with the pod's UID and
// the allocation record in metadata.annotations, so spec.nodeName and the record land in one
// atomic update. A 409 is success only when the pod is already on the same node with the same
// record (a retry after a lost reply). On failure an Event explains it on the pod; on success,
// when asked, a Normal Event names the GPUs the pod got (rate-limited).
//
// Thread-safety: bind and warn_fenced may be called concurrently.
#pragma once

#include <chrono>
#include <mutex>
#include <string>

#include "gapless/k8s/api_client.h"
#include "gapless/k8s/binder.h"

namespace gapless::k8s {

// Events beyond bind failures (always posted). Off by default.
struct BindEvents {
  bool on_success = false;  // a Normal "GaplessBound" Event naming the GPUs, MIG slices, shares
  double per_second = 5;    // at most this many success Events per second on average,
  double burst = 20;        // and this many at once; the rest are dropped (the bind is not)
};

class KubeBinder final : public Binder {
 public:
  explicit KubeBinder(ApiTransport& api, std::string component = "gapless-extender",
                      BindEvents events = {});
  Status bind(const BindRequest& req) override;
  // A Warning "NodeFenced" Event on pod `ns`/`name`, whose allocation record fenced `node`.
  // Rate-limited with the success Events. Best effort.
  void warn_fenced(const std::string& ns, const std::string& name, const std::string& node,
                   const std::string& why);

 private:
  void post_event(const BindRequest& req, const std::string& type, const std::string& reason,
                  const std::string& message);
  bool take_token();  // the rate limit: true when an Event may be posted now
  ApiTransport& api_;
  const std::string component_;
  const BindEvents events_;
  std::mutex mu_;
  double tokens_;
  std::chrono::steady_clock::time_point last_;
};

}  // namespace gapless::k8s
