#include "gapless/agent/mig_reaper.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "gapless/agent/pod_match.h"
#include "gapless/k8s/json_fields.h"

namespace gapless::agent {

MigReaper::MigReaper(MigInstances& mig, k8s::ApiTransport& api, std::string node,
                     std::chrono::seconds grace, std::function<void(const std::string&)> log)
    : mig_(mig), api_(api), node_(std::move(node)), grace_(grace), log_(std::move(log)) {}

Result<std::vector<MigSlot>> MigReaper::sweep(Clock::time_point now) {
  // Before the list: an instance handed out after this is not judged by this (older) list.
  const std::uint64_t generation = mig_.generation();
  const std::string path = "/api/v1/pods?fieldSelector=spec.nodeName%3D" + node_;
  auto response = api_.call("GET", path);
  if (!response.ok()) return Error{"listing this node's pods: " + response.error()};
  if (!response->ok()) return Error{"listing this node's pods: " + k8s::api_error(*response)};
  auto pods = nlohmann::json::parse(response->body, nullptr, false);
  if (pods.is_discarded() || !pods.contains("items")) {
    return Error{"listing this node's pods: the answer is no pod list"};
  }
  mig_.forget_missing();
  const auto uuids = mig_.gpu_uuids();
  const auto in_use = mig_in_use(pods, node_);
  auto used = [&](const MigSlot& s) {
    return std::any_of(in_use.begin(), in_use.end(), [&](const model::MigGrant& m) {
      auto it = uuids.find(m.gpu);
      return it != uuids.end() && it->second == s.gpu_uuid && m.start == s.start;
    });
  };
  std::vector<MigSlot> destroyed;
  std::map<MigSlot, Clock::time_point> still_unused;
  for (const MigSlot& slot : mig_.created_slots()) {
    if (used(slot)) continue;  // in use: its clock starts again when it is not
    auto it = unused_since_.find(slot);
    const auto since = it == unused_since_.end() ? now : it->second;
    if (now - since < grace_) {
      still_unused[slot] = since;
      continue;
    }
    if (Status s = mig_.destroy(slot, generation); !s.ok()) {
      if (log_) log_("MIG: not destroying " + to_string(slot) + ": " + s.error());
      still_unused[slot] = since;  // tried again at the next sweep
      continue;
    }
    if (log_) log_("MIG: destroyed " + to_string(slot) + ", unused for the grace period");
    destroyed.push_back(slot);
  }
  unused_since_ = std::move(still_unused);
  return destroyed;
}

}  // namespace gapless::agent
