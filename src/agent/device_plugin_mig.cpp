// The MIG path of the device plugin service (device_plugin_service.h): which placements the
// container gets, and making sure their instances exist (mig_instances.h).
#include <algorithm>

#include "device_plugin_service.h"

namespace gapless::agent {

std::string mig_device_id(const std::string& gpu_uuid, int start) {
  return gpu_uuid + "::slice-" + std::to_string(start);
}

// The record's placements, or (no record) those of the devices the kubelet chose.
Result<std::vector<MigSlot>> DevicePluginService::mig_slots_of(
    const std::optional<Admission>& admission, const std::vector<std::string>& ids) const {
  const std::string profile = mig_profile_of(options_.resource);
  std::vector<PluginDevice> found;
  std::vector<MigSlot> slots;
  if (admission && admission->has_record) {
    for (std::size_t i = 0; i < admission->mig.size(); ++i) {
      const auto& m = admission->mig[i];
      const std::string uuid = i < admission->mig_uuids.size() ? admission->mig_uuids[i] : "";
      auto d = record_gpu(uuid, m.gpu);
      if (!d) {
        return Error{"GPU " + (uuid.empty() ? std::to_string(m.gpu) : uuid) +
                     " of the allocation record serves no " + options_.resource +
                     " here (absent or not MIG-enabled)"};
      }
      found.push_back(*d);
      slots.push_back({d->gpu_uuid, profile, m.start});
    }
  } else {
    for (const auto& id : ids) {
      auto d = table_.by_id(id);
      if (!d) return Error{"unknown device " + id};
      found.push_back(*d);
      slots.push_back({d->gpu_uuid, profile, d->mig_start});
    }
  }
  for (const auto& d : found) {
    if (!d.healthy) return Error{"GPU " + d.gpu_uuid + " is unhealthy"};
  }
  return slots;
}

// Each placement's MIG device, its instance made if missing. An instance the agent made that
// is in the way may go only if no pod on this node that has not finished names it.
Result<std::vector<std::string>> DevicePluginService::mig_devices_for(
    const std::vector<MigSlot>& slots, const nlohmann::json& pods) {
  if (options_.mig == nullptr) return Error{options_.resource + ": MIG instances are not managed"};
  const auto uuids = options_.mig->gpu_uuids();
  std::vector<MigSlot> in_use;
  for (const auto& m : mig_in_use(pods, options_.node_name)) {
    if (auto it = uuids.find(m.gpu); it != uuids.end()) in_use.push_back({it->second, "", m.start});
  }
  auto removable = [&](const MigSlot& s) {
    return std::none_of(in_use.begin(), in_use.end(), [&](const MigSlot& u) {
      return u.gpu_uuid == s.gpu_uuid && u.start == s.start;
    });
  };
  std::vector<std::string> devices;
  for (const auto& slot : slots) {
    auto uuid = options_.mig->ensure(slot, removable);
    if (!uuid.ok()) return Error{uuid.error()};
    devices.push_back(*uuid);
  }
  return devices;
}

Result<std::vector<std::string>> DevicePluginService::allocate_mig(
    const std::optional<Admission>& admission, const std::vector<std::string>& ids,
    const nlohmann::json& pods) {
  auto slots = mig_slots_of(admission, ids);
  if (!slots.ok()) return Error{slots.error()};
  return mig_devices_for(*slots, pods);
}

}  // namespace gapless::agent
