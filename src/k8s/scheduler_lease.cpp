#include "gapless/k8s/scheduler_lease.h"

#include <nlohmann/json.hpp>

#include "gapless/k8s/json_fields.h"
#include "url.h"

namespace gapless::k8s {

bool lease_held_by(const std::string& holder, const std::string& replica) {
  if (replica.empty() || holder.size() < replica.size()) return false;
  if (holder.compare(0, replica.size(), replica) != 0) return false;
  return holder.size() == replica.size() || holder[replica.size()] == '_';
}

bool SchedulerLease::leads(Clock::time_point now) {
  if (options_.lease_name.empty()) return true;
  if (answer_ && now - answer_->first < options_.recheck) return answer_->second;
  const std::string path = "/apis/coordination.k8s.io/v1/namespaces/" +
                           url_encode(options_.lease_namespace) + "/leases/" +
                           url_encode(options_.lease_name);
  Result<ApiResponse> r = api_.call("GET", path);
  bool answer = options_.if_unreadable;
  if (!r.ok() || (!r->ok() && r->status != 404)) {
    if (log_) {
      log_(who_ + ": cannot read lease " + options_.lease_namespace + "/" + options_.lease_name +
           " (" + (r.ok() ? api_error(*r) : r.error()) + "); acting as if this replica " +
           (answer ? "led" : "did not lead"));
    }
  } else if (r->status == 404) {
    answer = false;  // nobody leads
  } else {
    const nlohmann::json lease = nlohmann::json::parse(r->body, nullptr, false);
    const nlohmann::json* spec = field(lease, "spec");
    answer = spec && lease_held_by(string_field(*spec, "holderIdentity"), options_.replica_name);
  }
  answer_ = std::make_pair(now, answer);
  return answer;
}

}  // namespace gapless::k8s
