#include "gapless/k8s/pod_requeue.h"

#include <algorithm>
#include <cstdio>
#include <ctime>

#include "gapless/k8s/json_fields.h"
#include "gapless/k8s/pod_api.h"

namespace gapless::k8s {

namespace {

using nlohmann::json;

// The patch's value: the time to the millisecond, so each nudge changes the pod (a merge patch
// that changes nothing is no update, and kube-scheduler would not see it).
std::string nudge_value() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t secs = std::chrono::system_clock::to_time_t(now);
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[40];
  const std::size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  std::snprintf(buf + n, sizeof buf - n, ".%03dZ", static_cast<int>(ms));
  return buf;
}

bool scheduled_condition_is_error(const json& pod) {
  const json* conditions = field_path(pod, {"status", "conditions"});
  if (!conditions || !conditions->is_array()) return false;
  for (const json& c : *conditions) {
    if (string_field(c, "type") != "PodScheduled") continue;
    return string_field(c, "status") == "False" && string_field(c, "reason") == "SchedulerError";
  }
  return false;
}

}  // namespace

bool parked_by_error(const json& pod, const std::string& scheduler_name) {
  const json* spec = field(pod, "spec");
  if (!spec || string_field(*spec, "schedulerName") != scheduler_name) return false;
  if (!string_field(*spec, "nodeName").empty()) return false;
  if (field_path(pod, {"metadata", "deletionTimestamp"})) return false;
  const json* status = field(pod, "status");
  const std::string phase = status ? string_field(*status, "phase") : "";
  if (!phase.empty() && phase != "Pending") return false;
  return scheduled_condition_is_error(pod);
}

LeaseOptions lease_options(const RequeueOptions& o, bool if_unreadable) {
  LeaseOptions l;
  l.lease_namespace = o.lease_namespace;
  l.lease_name = o.lease_name;
  l.replica_name = o.replica_name;
  l.recheck = o.leader_recheck;
  l.if_unreadable = if_unreadable;
  return l;
}

PodRequeue::PodRequeue(ApiTransport& api, RequeueOptions options, Log log)
    : api_(api),
      options_(std::move(options)),
      log_(std::move(log)),
      lease_(api_, lease_options(options_, true), "requeue", log_) {}

InformerHandlers PodRequeue::feed(InformerHandlers inner) {
  InformerHandlers h = std::move(inner);
  h.on_list = [this, next = h.on_list](const std::vector<json>& pods) {
    if (next) next(pods);
    on_list(pods);
  };
  h.on_event = [this, next = h.on_event](const std::string& type, const json& pod) {
    if (next) next(type, pod);
    on_event(type, pod);
  };
  return h;
}

void PodRequeue::on_list(const std::vector<json>& pods) {
  std::lock_guard lock(mu_);
  parked_.clear();
  for (const json& pod : pods) track_locked(pod);
}

void PodRequeue::on_event(const std::string& type, const json& pod) {
  std::lock_guard lock(mu_);
  if (type == "DELETED") {
    const json* uid = field_path(pod, {"metadata", "uid"});
    if (uid && uid->is_string()) parked_.erase(uid->get<std::string>());
    return;
  }
  track_locked(pod);
}

void PodRequeue::track_locked(const json& pod) {
  const json* meta = field(pod, "metadata");
  if (!meta) return;
  const std::string uid = string_field(*meta, "uid");
  if (uid.empty()) return;
  if (!parked_by_error(pod, options_.scheduler_name)) {
    parked_.erase(uid);
    return;
  }
  if (parked_.size() >= options_.max_tracked && !parked_.count(uid)) return;
  parked_[uid] = PodRef{string_field(*meta, "namespace"), string_field(*meta, "name")};
}

std::vector<std::pair<std::string, PodRequeue::PodRef>> PodRequeue::due_locked(
    std::size_t n) const {
  std::vector<std::pair<std::string, PodRef>> out;
  for (const auto& [uid, ref] : parked_) {
    if (out.size() >= n) break;
    if (!nudged_.count(uid)) out.emplace_back(uid, ref);
  }
  return out;
}

std::size_t PodRequeue::step(bool ready, Clock::time_point now) {
  const double burst = std::max(1.0, options_.per_second);
  if (!ready) {
    was_ready_ = false;
    return 0;
  }
  if (!was_ready_) {  // a new window
    was_ready_ = true;
    window_end_ = now + options_.window;
    nudged_.clear();
    tokens_ = burst;
    refilled_ = now;
    lease_.forget();
  }
  if (now >= window_end_ || nudged_.size() >= options_.max_per_window) return 0;
  tokens_ = std::min(burst, tokens_ + options_.per_second *
                                          std::chrono::duration<double>(now - refilled_).count());
  refilled_ = now;
  const std::size_t allowed =
      std::min(static_cast<std::size_t>(tokens_), options_.max_per_window - nudged_.size());
  std::vector<std::pair<std::string, PodRef>> due;
  {
    std::lock_guard lock(mu_);
    due = due_locked(allowed);
  }
  if (due.empty() || !lease_.leads(now)) return 0;
  const std::string value = nudge_value();
  std::size_t taken = 0;
  for (const auto& [uid, ref] : due) {
    nudged_.insert(uid);
    tokens_ -= 1;
    const std::string why = annotate_pod(api_, ref.ns, ref.name, kRequeueAnnotation, value);
    if (why.empty()) {
      ++patched_;
      ++taken;
    } else {
      ++failed_;
      if (log_) log_("requeue: pod " + ref.ns + "/" + ref.name + " not patched: " + why);
    }
  }
  if (log_) {
    log_("requeue: annotated " + std::to_string(taken) + " of " + std::to_string(due.size()) +
         " pod(s) kube-scheduler had parked after an extender error (" + kRequeueAnnotation + "=" +
         value + ")");
  }
  return due.size();
}

std::vector<std::string> PodRequeue::parked() const {
  std::lock_guard lock(mu_);
  std::vector<std::string> out;
  for (const auto& [uid, ref] : parked_) out.push_back(ref.ns + "/" + ref.name);
  std::sort(out.begin(), out.end());
  return out;
}

std::size_t PodRequeue::patched_total() const {
  return patched_.load();
}

std::size_t PodRequeue::failed_total() const {
  return failed_.load();
}

}  // namespace gapless::k8s
