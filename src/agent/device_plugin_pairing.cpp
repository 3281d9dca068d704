// The pairing side of the device plugin service (device_plugin_service.h, docs/node-pairing.md):
// refusing an Allocate whose devices are not the record's, and telling the extender's bind gate
// that a pod is fully served (gapless.io/allocated).
#include <algorithm>
#include <nlohmann/json.hpp>

#include "device_plugin_service.h"
#include "gapless/k8s/device_asks.h"
#include "gapless/k8s/pod_api.h"

namespace gapless::agent {

namespace {

std::string listed(const std::vector<std::string>& items) {
  std::string s;
  for (const auto& i : items) s += (s.empty() ? "" : ",") + i;
  return s.empty() ? "none" : s;
}

}  // namespace

std::optional<PluginDevice> DevicePluginService::record_gpu(const std::string& uuid,
                                                            int index) const {
  return uuid.empty() ? table_.gpu_at(index) : table_.gpu(uuid);
}

// The kubelet counts the devices it passed as this container's. When they are not the devices
// the record gives it (for shares: slots on another GPU), handing out the record's GPUs would
// give the container GPUs the kubelet believes free: refuse instead. The devices are compared as
// the kubelet names them, GPU by GPU (whole, shares) or placement by placement (MIG). Exception:
// the kubelet first hands a container the devices the pod's init containers held
// (devicesToReuse), in any order, so those may stand for any of the record's first grants.
Status DevicePluginService::kubelet_agrees(const Admission& a,
                                           const std::vector<std::string>& ids) const {
  if (!a.has_record) return {};
  const bool mig = kind() == GrantKind::kMig;
  auto name = [&](const PluginDevice& d) {
    return mig ? mig_device_id(d.gpu_uuid, d.mig_start) : d.gpu_uuid;
  };
  std::vector<std::string> passed, recorded, reusable;
  for (const auto& id : ids) {
    auto d = table_.by_id(id);
    if (!d) return Error{"unknown device " + id};
    passed.push_back(name(*d));
  }
  // A record GPU that is not served here or unhealthy: gpus_of / mig_slots_of refuse it with
  // their own, clearer error.
  bool defer = false;
  auto add = [&](const std::string& uuid, int index, int start, std::vector<std::string>* to) {
    auto d = record_gpu(uuid, index);
    // A MIG placement the plugin does not advertise (an operator's layout without it): the
    // kubelet could not have passed it; mig_devices_for says why it cannot be made.
    if (!d || !d->healthy || (mig && !table_.by_id(mig_device_id(d->gpu_uuid, start)))) {
      defer = true;
      return;
    }
    to->push_back(mig ? mig_device_id(d->gpu_uuid, start) : d->gpu_uuid);
  };
  if (mig) {
    for (std::size_t i = 0; i < a.mig.size(); ++i) {
      add(i < a.mig_uuids.size() ? a.mig_uuids[i] : "", a.mig[i].gpu, a.mig[i].start, &recorded);
    }
    for (std::size_t i = 0; i < a.reusable_mig.size(); ++i) {
      add(i < a.reusable_mig_uuids.size() ? a.reusable_mig_uuids[i] : "", a.reusable_mig[i].gpu,
          a.reusable_mig[i].start, &reusable);
    }
  } else {
    for (const auto& g : a.grants) add(g.uuid, g.index, -1, &recorded);
    for (const auto& g : a.reusable) add(g.uuid, g.index, -1, &reusable);
  }
  if (defer) return {};
  bool agrees = false;
  if (reusable.empty()) {
    auto p = passed, r = recorded;
    std::sort(p.begin(), p.end());
    std::sort(r.begin(), r.end());
    agrees = p == r;
  } else {
    agrees = std::all_of(passed.begin(), passed.end(), [&](const std::string& x) {
      return std::find(recorded.begin(), recorded.end(), x) != recorded.end() ||
             std::find(reusable.begin(), reusable.end(), x) != reusable.end();
    });
  }
  if (agrees) return {};
  return Error{"the kubelet allocated " + listed(passed) + " to pod " + a.pod_ns + "/" +
               a.pod_name + " container " + a.container + ", whose allocation record gives it " +
               listed(recorded) +
               "; refusing rather than handing out GPUs the kubelet's accounting does not know "
               "(another pod holds the record's devices in the kubelet's view)"};
}

// {"v":1,"resource":R,"containers":{"<container>":["<device>",...]}}: what this plugin handed
// to each of the pod's containers. Written once, after the last one; a failure is logged (the
// gate entry then closes when the pod starts, or expires).
void DevicePluginService::mark_allocated(const Admission& a) {
  nlohmann::json containers = nlohmann::json::object();
  for (const auto& e : checkpoint_.entries()) {
    if (e.pod_uid == a.pod_uid) containers[e.container] = e.devices;
  }
  const nlohmann::json value = {
      {"v", 1}, {"resource", options_.resource}, {"containers", containers}};
  const std::string failure = k8s::annotate_pod(
      api_, a.pod_ns, a.pod_name, std::string(k8s::kAllocatedAnnotation), value.dump());
  if (!failure.empty() && log_) {
    log_("marking pod " + a.pod_ns + "/" + a.pod_name + " " +
         std::string(k8s::kAllocatedAnnotation) + " failed: " + failure);
  }
}

}  // namespace gapless::agent
