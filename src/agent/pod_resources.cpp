#include "gapless/agent/pod_resources.h"

#include <grpcpp/grpcpp.h>

#include "podresources/v1/api.grpc.pb.h"

namespace gapless::agent {

struct PodResourcesClient::Stub {
  std::unique_ptr<v1::PodResourcesLister::Stub> lister;
};

PodResourcesClient::PodResourcesClient(std::string socket, std::chrono::milliseconds deadline)
    : socket_(std::move(socket)), deadline_(deadline), stub_(std::make_unique<Stub>()) {
  // The channel connects lazily: a kubelet that starts later is found by the next call.
  auto channel = grpc::CreateChannel("unix:" + socket_, grpc::InsecureChannelCredentials());
  stub_->lister = v1::PodResourcesLister::NewStub(channel);
}

PodResourcesClient::~PodResourcesClient() = default;

Result<std::vector<AssignedPod>> PodResourcesClient::list() const {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + deadline_);
  v1::ListPodResourcesRequest request;
  v1::ListPodResourcesResponse reply;
  const grpc::Status s = stub_->lister->List(&ctx, request, &reply);
  if (!s.ok()) {
    return Error{"PodResources List on " + socket_ + ": " + s.error_message() + " (code " +
                 std::to_string(static_cast<int>(s.error_code())) + ")"};
  }
  std::vector<AssignedPod> pods;
  pods.reserve(reply.pod_resources_size());
  for (const auto& p : reply.pod_resources()) {
    AssignedPod pod{p.namespace_(), p.name(), {}};
    for (const auto& c : p.containers()) {
      AssignedContainer container{c.name(), {}};
      for (const auto& d : c.devices()) {
        container.devices.push_back(
            {d.resource_name(),
             std::vector<std::string>(d.device_ids().begin(), d.device_ids().end())});
      }
      pod.containers.push_back(std::move(container));
    }
    pods.push_back(std::move(pod));
  }
  return pods;
}

}  // namespace gapless::agent
