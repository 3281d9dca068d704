// Writes one annotation (the topology annotation by default) onto this node's Node object with
// a JSON merge patch on metadata.annotations, and only when its text changed: the agent re-scans
// every poll interval, and an unchanged scan must not become a write (no write loop, no churn of
// the Node's resourceVersion for every watcher in the cluster).
//
// Ownership: borrows the transport, which must outlive the publisher.
// Thread-safety: none; the agent's loop thread uses it.
#pragma once

#include <optional>
#include <string>

#include "gapless/agent/topology_annotation.h"
#include "gapless/k8s/api_client.h"
#include "gapless/model/result.h"

namespace gapless::agent {

class NodePublisher {
 public:
  NodePublisher(k8s::ApiTransport& api, std::string node_name,
                std::string annotation_key = kTopologyAnnotation);

  // PATCHes `annotation` (empty: removes the annotation) unless it equals the last text this
  // publisher wrote or, before the first write, the value the Node already carries (read once, so a
  // restarted agent with an unchanged machine writes nothing). True: a PATCH was sent and accepted.
  // A failed PATCH is an error and is tried again at the next call.
  Result<bool> publish(const std::string& annotation);

 private:
  std::string path() const { return "/api/v1/nodes/" + node_name_; }

  k8s::ApiTransport& api_;
  std::string node_name_;
  std::string key_;
  std::optional<std::string> published_;  // what the Node holds ("": none), as far as we know
};

}  // namespace gapless::agent
