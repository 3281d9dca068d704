// The Kubernetes binder: POST /api/v1/namespaces/{ns}/pods/{name}/binding with the pod's UID and
// the allocation record in metadata.annotations, so spec.nodeName and the record land in one
// atomic update. A 409 is success only when the pod is already on the same node with the same
// record (a retry after a lost reply). On failure an Event explains it on the pod.
#pragma once

#include <string>

#include "gapless/k8s/api_client.h"
#include "gapless/k8s/binder.h"

namespace gapless::k8s {

class KubeBinder final : public Binder {
 public:
  explicit KubeBinder(ApiTransport& api, std::string component = "gapless-extender");
  Status bind(const BindRequest& req) override;

 private:
  void post_event(const BindRequest& req, const std::string& reason, const std::string& message);
  ApiTransport& api_;
  const std::string component_;
};

}  // namespace gapless::k8s
