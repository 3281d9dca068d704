#include "gapless/agent/pod_resources.h"

#include <grpcpp/grpcpp.h>

#include "podresources/v1/api.grpc.pb.h"

namespace gapless::agent {

PodResourcesClient::PodResourcesClient(std::string socket, std::chrono::milliseconds deadline)
    : socket_(std::move(socket)), deadline_(deadline) {}

Result<std::vector<AssignedPod>> PodResourcesClient::list() const {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + deadline_);
  v1::ListPodResourcesRequest request;
  v1::ListPodResourcesResponse reply;
  // A channel per call: a restarted kubelet's socket is a new file, and a long-lived channel
  // would sit in reconnect backoff (up to minutes) after it went away. A call every scan
  // (30 s) makes the new connection cheap.
  // Its own subchannel pool, or gRPC would share a subchannel (and its backoff) across calls.
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  auto channel =
      grpc::CreateCustomChannel("unix:" + socket_, grpc::InsecureChannelCredentials(), args);
  auto lister = v1::PodResourcesLister::NewStub(channel);
  const grpc::Status s = lister->List(&ctx, request, &reply);
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
