#include "gapless/server/consolidator.h"

#include <algorithm>

#include "gapless/k8s/pod_api.h"
#include "gapless/placement/consolidation.h"

namespace gapless::server {

namespace {

std::string key(const std::string& ns, const std::string& name) {
  return ns + "/" + name;
}

double seconds(Consolidator::Clock::time_point t) {
  return std::chrono::duration<double>(t.time_since_epoch()).count();
}

// How far the Unix epoch lies before the steady clock's, now.
double unix_offset_s() {
  const double unix_now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  return unix_now - seconds(Consolidator::Clock::now());
}

// "ns/a (to node b), ns/c (from node e to node d)": the moves of a plan freeing `node` (a
// chain's moves come from another node).
std::string moves_text(const std::vector<placement::PlannedMove>& moves, const std::string& node) {
  std::string out;
  for (const auto& m : moves) {
    if (!out.empty()) out += ", ";
    const std::string from = m.from == node ? "" : "from node " + m.from + " ";
    out += key(m.pod_ns, m.pod_name) + " (" + from + "to node " + m.to + ")";
  }
  return out;
}

// The token bucket's size: a second's worth of API calls, at least one.
double bucket_size(const ConsolidatorOptions& o) {
  return std::max(1.0, o.per_second);
}

}  // namespace

Consolidator::Consolidator(placement::Scheduler& scheduler, k8s::ApiTransport& api, Leads leads,
                           Budgets budgets, ConsolidatorOptions options, Log log)
    : scheduler_(scheduler),
      api_(api),
      leads_(std::move(leads)),
      budgets_(std::move(budgets)),
      options_(std::move(options)),
      log_(std::move(log)),
      unix_offset_s_(unix_offset_s()) {}

double Consolidator::engine_s(Clock::time_point now) const {
  return seconds(now) + unix_offset_s_;
}

void Consolidator::waiting(const k8s::ParsedPod& pod) {
  if (pod.info.uid.empty() || pod.request.kind == model::RequestKind::kNone) return;
  std::lock_guard lock(mu_);
  auto it = waiting_.find(pod.info.uid);
  if (it != waiting_.end()) {
    it->second.pod = pod;
    return;
  }
  if (waiting_.size() >= options_.max_tracked) return;
  Waiter w;
  w.pod = pod;
  w.seq = next_seq_++;
  waiting_.emplace(pod.info.uid, std::move(w));
}

void Consolidator::stopped(const std::string& uid) {
  std::lock_guard lock(mu_);
  waiting_.erase(uid);
}

std::size_t Consolidator::evicted_total() const {
  return evicted_.load();
}

std::size_t Consolidator::blocked_total() const {
  return blocked_count_.load();
}

std::vector<std::string> Consolidator::tracked() const {
  std::lock_guard lock(mu_);
  std::vector<std::string> out;
  for (const auto& [uid, w] : waiting_) out.push_back(key(w.pod.info.ns, w.pod.info.name));
  std::sort(out.begin(), out.end());
  return out;
}

void Consolidator::refill(Clock::time_point now) {
  const double burst = bucket_size(options_);
  if (!started_) {
    started_ = true;
    tokens_ = burst;
  } else {
    tokens_ = std::min(burst, tokens_ + options_.per_second *
                                            std::chrono::duration<double>(now - refilled_).count());
  }
  refilled_ = now;
}

std::size_t Consolidator::moves_in_window(Clock::time_point now) {
  while (!moves_.empty() && now - moves_.front() >= options_.window) moves_.pop_front();
  return moves_.size();
}

std::set<std::string> Consolidator::excluded(Clock::time_point now) {
  std::set<std::string> out;
  for (auto it = blocked_.begin(); it != blocked_.end();) {
    if (it->second <= now) {
      it = blocked_.erase(it);
    } else {
      out.insert(it->first);
      ++it;
    }
  }
  if (budgets_) {
    for (const model::DisruptionBudget& b : budgets_()) {
      if (b.allowed <= 0) out.insert(b.pods.begin(), b.pods.end());
    }
  }
  return out;
}

bool Consolidator::still_terminating(Waiter& w) const {
  if (w.evicted.empty()) return false;
  scheduler_.read([&](const model::Cluster& c) {
    std::erase_if(w.evicted, [&](const std::string& uid) { return c.allocation(uid) == nullptr; });
  });
  return !w.evicted.empty();
}

std::size_t Consolidator::holding_gpus(const std::set<std::string>& uids) const {
  std::size_t n = 0;
  scheduler_.read([&](const model::Cluster& c) {
    for (const std::string& uid : uids) {
      const model::Allocation* a = c.allocation(uid);
      if (a != nullptr && (!a->gpus.empty() || !a->mig.empty())) ++n;
    }
  });
  return n;
}

void Consolidator::tell_waiting(Waiter& w, const std::string& type, const std::string& reason,
                                const std::string& message) {
  if (log_) log_("consolidation: pod " + key(w.pod.info.ns, w.pod.info.name) + ": " + message);
  const std::string said = reason + ": " + message;
  if (said == w.last_event) return;
  w.last_event = said;
  (void)k8s::post_pod_event(api_, k8s::PodEvent{.ns = w.pod.info.ns,
                                                .name = w.pod.info.name,
                                                .uid = w.pod.info.uid,
                                                .type = type,
                                                .reason = reason,
                                                .message = message,
                                                .component = options_.component});
}

std::size_t Consolidator::step(bool ready, Clock::time_point now) {
  if (!ready) return 0;
  // The rooms held for pods planned for run out on this clock (Scheduler::hold_room), whether or
  // not this replica plans any more.
  scheduler_.expire_holds(engine_s(now));
  const auto loaded = scheduler_.policy();
  const placement::ConsolidationRules& rules = loaded->policy.consolidation;
  if (!rules.enabled) return 0;
  refill(now);
  std::vector<std::pair<std::uint64_t, Waiter>> due;
  {
    std::lock_guard lock(mu_);
    for (const auto& [uid, w] : waiting_) {
      if (w.next_try <= now) due.emplace_back(w.seq, w);
    }
  }
  std::sort(due.begin(), due.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  bool asked_lease = false;
  std::size_t made = 0;
  for (auto& [seq, w] : due) {
    if (still_terminating(w)) {
      std::lock_guard lock(mu_);
      if (auto it = waiting_.find(w.pod.info.uid); it != waiting_.end()) {
        it->second.evicted = w.evicted;
      }
      continue;
    }
    if (!asked_lease) {
      asked_lease = true;
      if (leads_ && !leads_(now)) return 0;
    }
    const Outcome outcome = consolidate_for(w, rules, now, &made);
    {
      std::lock_guard lock(mu_);
      if (auto it = waiting_.find(w.pod.info.uid); it != waiting_.end()) {
        it->second.evicted = w.evicted;
        it->second.last_event = w.last_event;
        if (outcome != Outcome::kWaitForTokens) it->second.next_try = now + options_.backoff;
      }
    }
    // One plan per step: what it evicts changes the model the next plan would read.
    if (outcome != Outcome::kNothing) break;
  }
  return made;
}

Consolidator::Outcome Consolidator::consolidate_for(Waiter& w,
                                                    const placement::ConsolidationRules& rules,
                                                    Clock::time_point now, std::size_t* made) {
  const auto loaded = scheduler_.policy();
  std::string error;
  const placement::Profile* profile =
      placement::Scheduler::select_profile(*loaded, w.pod.info, &error);
  if (profile == nullptr) return Outcome::kNothing;
  const std::string who = key(w.pod.info.ns, w.pod.info.name);
  // status.startTime of each pod, on engine_s's clock: GPU-time lost breaks ties between plans.
  const placement::Scheduler::StartedAt started_at = [](const model::Allocation& a) {
    return a.started_unix_s < 0 ? -1.0 : static_cast<double>(a.started_unix_s);
  };
  for (int attempt = 0; attempt <= options_.max_replans; ++attempt) {
    const std::set<std::string> skip = excluded(now);
    const placement::ConsolidationSearch search = scheduler_.consolidate(
        w.pod.info, w.pod.request, *profile, engine_s(now), {}, started_at,
        [&](const model::Allocation& a) { return skip.count(a.pod_uid) == 0; });
    // A pod that fits now is kube-scheduler's to place: nothing is evicted for it.
    if (search.fits_now) return Outcome::kNothing;
    if (!search.plan) {
      std::string message = std::string(attempt > 0 ? "no other plan" : "no plan") + ": waiting; " +
                            placement::describe(search, rules);
      if (const std::size_t held = holding_gpus(skip); held > 0) {
        message += "; " + std::to_string(held) +
                   " pod(s) left out because a PodDisruptionBudget refused or allows no eviction";
      }
      tell_waiting(w, attempt > 0 ? "Warning" : "Normal",
                   attempt > 0 ? "ConsolidationBlocked" : "ConsolidationNoPlan", message);
      return Outcome::kNothing;
    }
    const placement::ConsolidationPlan& plan = *search.plan;
    const std::string why = placement::describe(search, rules);
    if (rules.dry_run) {
      tell_waiting(w, "Normal", "ConsolidationDryRun",
                   "dry run: would evict " + moves_text(plan.moves, plan.node) + " from node " +
                       plan.node + "; " + why);
      return Outcome::kNothing;
    }
    // A plan is carried out whole or waits: twice its size in calls (dry runs, then evictions).
    // One larger than the bucket (3 moves, 6 calls, at the default 5 a second) goes when the
    // bucket is full, the debt repaid by the refill before the next: else it waited forever, and
    // every pod after it with it.
    const double calls = 2.0 * static_cast<double>(plan.moves.size());
    if (tokens_ < std::min(calls, bucket_size(options_))) return Outcome::kWaitForTokens;
    if (moves_in_window(now) + plan.moves.size() > options_.max_moves_per_window) {
      if (log_) log_("consolidation: pod " + who + ": the cap of evictions per window is reached");
      return Outcome::kWaitForTokens;
    }
    bool failed = false;
    const placement::PlannedMove* refused = dry_run(plan, &failed);
    if (failed) return Outcome::kNothing;
    if (refused != nullptr) {
      blocked_[refused->pod_uid] = now + options_.blocked_for;
      tell_waiting(w, "Warning", "ConsolidationBlocked",
                   "a PodDisruptionBudget refuses evicting pod " +
                       key(refused->pod_ns, refused->pod_name) + "; looking for another plan");
      continue;
    }
    // The room is held before the first eviction: the controllers recreate the pods at once,
    // and kube-scheduler may filter the replacements before the last eviction call returns.
    scheduler_.hold_room(w.pod.info, plan, engine_s(now));
    const std::vector<placement::PlannedMove> done = evict(plan, w, now);
    if (done.empty()) {
      scheduler_.release_room(w.pod.info.uid);
      // The first real eviction refused by a budget (a race with the dry run): plan again
      // without that pod. Any other failure: try again after the backoff.
      if (blocked_.count(plan.moves.front().pod_uid) != 0) continue;
      return Outcome::kNothing;
    }
    placement::ConsolidationPlan made_plan = plan;
    made_plan.moves = done;
    scheduler_.moves_made(made_plan, engine_s(now));
    // A plan cut short holds the room for what it evicted only (the pods left never leave).
    if (done.size() < plan.moves.size()) {
      scheduler_.hold_room(w.pod.info, made_plan, engine_s(now));
    }
    for (const auto& m : done) w.evicted.insert(m.pod_uid);
    *made += done.size();
    std::string message = "evicted " + moves_text(done, plan.node) + " from node " + plan.node +
                          " so that this pod fits there; " + why;
    if (done.size() < plan.moves.size()) {
      message += "; the plan stopped after " + std::to_string(done.size()) + " of " +
                 std::to_string(plan.moves.size()) + " evictions (refused), waiting for these";
    }
    tell_waiting(w, "Normal", "ConsolidationPlan", message);
    return Outcome::kEvicted;
  }
  return Outcome::kNothing;
}

const placement::PlannedMove* Consolidator::dry_run(const placement::ConsolidationPlan& plan,
                                                    bool* failed) {
  for (const auto& m : plan.moves) {
    tokens_ -= 1;
    const k8s::EvictionResult r = k8s::evict_pod(api_, m.pod_ns, m.pod_name, m.pod_uid, true);
    if (r.outcome == k8s::EvictionOutcome::kBlocked) {
      ++blocked_count_;
      return &m;
    }
    if (r.outcome != k8s::EvictionOutcome::kEvicted) {
      if (log_) {
        log_("consolidation: dry run of evicting pod " + key(m.pod_ns, m.pod_name) +
             " failed: " + r.why);
      }
      *failed = true;
      return nullptr;
    }
  }
  return nullptr;
}

std::vector<placement::PlannedMove> Consolidator::evict(const placement::ConsolidationPlan& plan,
                                                        const Waiter& w, Clock::time_point now) {
  std::vector<placement::PlannedMove> done;
  const std::string for_whom = key(w.pod.info.ns, w.pod.info.name);
  for (const auto& m : plan.moves) {
    tokens_ -= 1;
    const k8s::EvictionResult r = k8s::evict_pod(api_, m.pod_ns, m.pod_name, m.pod_uid);
    if (r.outcome == k8s::EvictionOutcome::kEvicted) {
      done.push_back(m);
      moves_.push_back(now);
      ++evicted_;
      (void)k8s::post_pod_event(
          api_,
          k8s::PodEvent{.ns = m.pod_ns,
                        .name = m.pod_name,
                        .uid = m.pod_uid,
                        .type = "Normal",
                        .reason = "ConsolidationEviction",
                        .message = "evicted by Gapless to make room on node " + plan.node +
                                   " for pod " + for_whom + ", which fits no node; " +
                                   "its controller recreates it (planned on node " + m.to + ")",
                        .component = options_.component});
      continue;
    }
    if (r.outcome == k8s::EvictionOutcome::kBlocked) {
      ++blocked_count_;
      blocked_[m.pod_uid] = now + options_.blocked_for;
    }
    if (log_) {
      log_("consolidation: evicting pod " + key(m.pod_ns, m.pod_name) + " for " + for_whom +
           " failed: " + r.why);
    }
    break;
  }
  return done;
}

}  // namespace gapless::server
