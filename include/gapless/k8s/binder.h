// Binder: how a bind decision leaves the extender. The Kubernetes binder (kube_binder.h) POSTs the Binding with
// the allocation record; the in-memory binder (used with --cluster) just remembers it, so demos
// and tests run end to end without an API server.
#pragma once

#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "gapless/k8s/pod_request.h"
#include "gapless/model/result.h"

namespace gapless::k8s {

struct BindRequest {
  std::string ns;
  std::string name;
  std::string uid;
  std::string node;
  std::map<std::string, std::string> annotations;  // gapless.io/allocation, gpushare keys
};

// Implementations must be thread-safe: binds run concurrently with each other.
class Binder {
 public:
  virtual ~Binder() = default;
  // Before anything is reserved: the pod to bind, as the cluster knows it. `filtered` is the pod
  // /filter was sent, which any client that reaches the extender can write; `req` carries no
  // annotations yet. An error refuses the bind (the caller answers it, the model unchanged).
  // This default trusts `filtered`: without an API server (--cluster, the demo, tests) the
  // filter body is all there is. KubeBinder reads the pod from the API server and checks it.
  virtual Result<ParsedPod> admit(const BindRequest& req, const ParsedPod& filtered) {
    (void)req;
    return filtered;
  }
  // Makes the binding durable. On error nothing was bound (the caller rolls the model back).
  virtual Status bind(const BindRequest& req) = 0;
};

class InMemoryBinder final : public Binder {
 public:
  Status bind(const BindRequest& req) override;
  std::vector<BindRequest> bindings() const;

 private:
  mutable std::mutex mu_;
  std::vector<BindRequest> bindings_;
};

}  // namespace gapless::k8s
