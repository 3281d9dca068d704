#include "gapless/k8s/binder.h"

namespace gapless::k8s {

Status InMemoryBinder::bind(const BindRequest& req) {
  std::lock_guard lock(mu_);
  bindings_.push_back(req);
  return Status::Ok();
}

std::vector<BindRequest> InMemoryBinder::bindings() const {
  std::lock_guard lock(mu_);
  return bindings_;
}

}  // namespace gapless::k8s
