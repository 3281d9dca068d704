// The GPU Feature Discovery label nvidia.com/gpu.product on this node's Node, where GFD does not
// run (docs/node-side.md, "The product label"): kube-scheduler can then match the GPU model of a
// pod's node affinity on every node the agent runs on.
//
// Whose label it is: the agent writes it only where it is absent or holds the value the agent
// wrote last (recorded in the annotation kProductLabelOwner, in the same patch), and never where
// Node Feature Discovery lists it among the labels it manages. A value someone else wrote (GFD)
// is left alone, and the agent's record of ownership removed. Every patch carries the
// resourceVersion it decided on, so a label written meanwhile is never overwritten (409: tried
// again at the next scan).
//
// Ownership: borrows the transport, which must outlive it.
// Thread-safety: none; the agent's loop thread uses it.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "gapless/agent/gpu_scan.h"
#include "gapless/k8s/api_client.h"
#include "gapless/model/result.h"

namespace gapless::agent {

inline constexpr const char* kProductLabel = "nvidia.com/gpu.product";
// The value the agent last wrote into kProductLabel; absent where the agent does not own it.
inline constexpr const char* kProductLabelOwner = "gapless.io/gpu-product-label";
// Node Feature Discovery's list of the labels it manages (comma-separated label names).
inline constexpr const char* kNfdFeatureLabels = "nfd.node.kubernetes.io/feature-labels";

// The label value for these GPUs: the model most of them have (ties: the model of the
// lowest-indexed GPU among the tied ones, which is GFD's value on a uniform node: GFD labels
// the first GPU's model). "" when there are no GPUs or the model is no valid label value.
std::string product_label_value(const std::vector<GpuState>& gpus);

class ProductLabeler {
 public:
  ProductLabeler(k8s::ApiTransport& api, std::string node_name);

  // Makes the label `value` where the agent owns it (see above). Reads the Node only when
  // `value` differs from the last value decided on, so an unchanged node costs no request.
  // True: a PATCH was sent and accepted. Errors (the read or patch failed, a conflict) are
  // tried again at the next call. An empty `value` does nothing.
  Result<bool> publish(const std::string& value);

 private:
  std::string path() const { return "/api/v1/nodes/" + node_name_; }

  k8s::ApiTransport& api_;
  std::string node_name_;
  std::optional<std::string> decided_;  // the value the last successful call decided on
};

}  // namespace gapless::agent
