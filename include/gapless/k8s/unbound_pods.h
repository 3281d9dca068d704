// The pods the pod informer last saw unbound, with what the bind check (kube_binder.h) needs of
// each: its GPU requests as Gapless reads them and its nodeSelector, required node affinity and
// tolerations. Bind checks a pod the informer holds under the bind's UID against this copy
// instead of reading it from the API server: on an existing pod (Kubernetes 1.26) nodeSelector,
// affinity and container resources cannot change and tolerations can only be added (an older
// copy then refuses more nodes, never fewer), so for the check the informer's copy is as good as
// a read. Its annotations and labels (model pins, profile) are the informer's latest, as the
// model's and kube-scheduler's own are.
//
// Only unbound pods are kept (a bound pod is dropped, and then a bind of it reads the API
// server's copy and finds it bound), and only pods whose requests parse (a pod that does not is
// read too, and refused with the read's reason): the memory is that of the pending pods.
//
// Thread-safe: the informer thread feeds it while bind threads read it.
#pragma once

#include <mutex>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "gapless/k8s/informer.h"
#include "gapless/k8s/node_fit.h"
#include "gapless/k8s/pod_request.h"

namespace gapless::k8s {

struct UnboundPod {
  ParsedPod pod;           // parse_pod of the informer's copy (info.uid: its UID)
  PodPlacement placement;  // read_pod_placement of the same copy
};

class UnboundPodStore {
 public:
  // `inner` (the model's pod handlers) first, then this store, for every list and event.
  InformerHandlers feed(InformerHandlers inner);
  // Pod `ns`/`name` as the informer last saw it, when it was unbound then.
  std::optional<UnboundPod> find(const std::string& ns, const std::string& name) const;
  void replace(const std::vector<nlohmann::json>& pods);
  void apply(const std::string& type, const nlohmann::json& pod);
  std::size_t size() const;

 private:
  mutable std::mutex mu_;
  std::unordered_map<std::string, UnboundPod> pods_;  // by "ns/name"
};

}  // namespace gapless::k8s
