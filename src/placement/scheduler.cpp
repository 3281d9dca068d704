#include "gapless/placement/scheduler.h"

#include <algorithm>
#include <functional>
#include <thread>
#include <unordered_map>
#include <utility>

#include "gapless/placement/demand.h"
#include "gapless/placement/fit.h"

namespace gapless::placement {

namespace {

// keep_best (Profile): keeps the `keep` best of r.passed, ranked as normalize ranks them (higher
// raw score, then the lower tie-break rank), in input order; moves the others to r.rejected
// under one unresolvable reason. `raw` is aligned with r.passed.
void narrow(FilterResult& r, std::size_t keep, const std::vector<double>& raw) {
  if (keep == 0 || r.passed.size() <= keep) return;
  // The keep-th best score: nodes above it are kept; among those level with it, the lowest
  // tie-break ranks fill the remaining places (ranks are hashed for those nodes only).
  std::vector<double> sorted = raw;
  std::nth_element(sorted.begin(), sorted.begin() + static_cast<std::ptrdiff_t>(keep - 1),
                   sorted.end(), std::greater<>());
  const double threshold = sorted[keep - 1];
  std::vector<bool> kept(r.passed.size(), false);
  std::vector<std::pair<std::uint64_t, std::size_t>> level;  // (rank, index) at the threshold
  std::size_t places = keep;
  for (std::size_t i = 0; i < raw.size(); ++i) {
    if (raw[i] > threshold) {
      kept[i] = true;
      --places;
    } else if (raw[i] == threshold) {
      level.emplace_back(tie_break_rank(r.passed[i]), i);
    }
  }
  std::nth_element(level.begin(), level.begin() + static_cast<std::ptrdiff_t>(places - 1),
                   level.end());
  for (std::size_t i = 0; i < places; ++i) kept[level[i].second] = true;
  const std::size_t reason = r.reasons.size();
  // Short and the same for every node: the answer lists every narrowed-out node with it (at
  // 5,000 nodes a 100-byte text made a 560 KB filter answer for kube-scheduler to decode).
  r.reasons.push_back({"gapless: narrowed out by filter.keepBest", "narrowed", true});
  std::vector<std::string> passed;
  passed.reserve(keep);
  for (std::size_t i = 0; i < r.passed.size(); ++i) {
    if (kept[i]) {
      passed.push_back(std::move(r.passed[i]));
    } else {
      r.rejected.push_back({std::move(r.passed[i]), reason});
    }
  }
  r.passed = std::move(passed);
}

// Pods counted by UID before the oldest is forgotten (pods filtered and never bound stay in the
// table otherwise; real pods are forgotten when they are deleted).
constexpr std::size_t kMaxSeenPods = 200000;

// Distinct request shapes tallied for warm-up; a cluster with more keeps the first ones seen.
constexpr std::size_t kMaxAskedShapes = 1024;

// Nodes warm() prepares per hold of the read lock: short enough (~0.3 ms at the cold cost of
// ~1 us per node) that a reserve waiting for the write lock barely notices.
constexpr std::size_t kWarmChunk = 256;

bool uses_draw(const Profile& p) {
  for (const auto* level : {&p.node, &p.gpu}) {
    for (const WeightedStrategy& ws : *level) {
      if (ws.strategy->uses_draw()) return true;
    }
  }
  return false;
}

}  // namespace

Scheduler::Scheduler(model::Cluster cluster, Policy policy, SchedulerOptions options)
    : options_(options),
      cluster_(std::move(cluster)),
      mix_(options.fixed_mix != nullptr ? options.fixed_mix : &learner_.mix()),
      fragments_(*mix_) {
  cluster_.set_check_host(options_.check_host);
  cluster_.take_changes();
  fragments_.rebuild(cluster_.nodes());
  summary_.rebuild(cluster_.nodes(), fragments_);
  quota_usage_.rebuild(cluster_);
  policy_ = load(std::move(policy));
}

std::shared_ptr<const LoadedPolicy> Scheduler::load(Policy policy) const {
  auto loaded = std::make_shared<LoadedPolicy>(options_.cache_shapes);
  loaded->policy = std::move(policy);
  for (Profile& p : loaded->policy.profiles) {
    p.context.workload = mix_;
    p.context.fragments = &fragments_;
    p.context.cache_owner_tracks_mix = true;
  }
  loaded->cache_mix_version = mix_version_.load();
  return loaded;
}

std::shared_ptr<const LoadedPolicy> Scheduler::policy() const {
  std::lock_guard lock(policy_mu_);
  return policy_;
}

void Scheduler::set_policy(Policy policy) {
  // Under the read lock: the new cache starts at the current mix version, and a mix change
  // (write lock) cannot slip in between.
  std::shared_lock model(mu_);
  auto loaded = load(std::move(policy));
  std::lock_guard lock(policy_mu_);
  policy_ = std::move(loaded);
}

const Profile* Scheduler::select_profile(const LoadedPolicy& loaded, const model::PodInfo& pod,
                                         std::string* error) {
  return placement::select_profile(loaded.policy, pod, error);
}

bool Scheduler::observe(const model::PodInfo& pod, const model::GpuRequest& req) {
  if (pod.uid.empty()) return false;
  {
    // Most calls are for a pod already counted (prioritize after filter, informer updates):
    // answer those under the read lock, so they never wait for or block the stages.
    std::shared_lock lock(mu_);
    if (seen_.count(pod.uid) != 0) return false;
  }
  auto lock = lock_for_write();
  if (!seen_.insert(pod.uid).second) return false;
  seen_order_.push_back(pod.uid);
  if (seen_order_.size() > kMaxSeenPods) {
    seen_.erase(seen_order_.front());
    seen_order_.pop_front();
  }
  if (auto [it, added] = asked_index_.try_emplace(req, asked_.size()); !added) {
    ++asked_[it->second].count;
  } else if (asked_.size() < kMaxAskedShapes) {
    asked_.push_back({req, pod, 1});
  } else {
    asked_index_.erase(it);
  }
  if (options_.fixed_mix == nullptr && learner_.observe(shape_of(req, /*with_memory=*/true))) {
    mix_changed();
  }
  return true;
}

std::vector<std::pair<model::GpuRequest, const Profile*>> Scheduler::most_asked(
    const LoadedPolicy& loaded, std::size_t n) const {
  std::vector<const AskedShape*> order;
  order.reserve(asked_.size());
  for (const AskedShape& a : asked_) order.push_back(&a);
  // asked_ is in first-asked order, so a stable sort by count keeps that order on ties.
  std::stable_sort(order.begin(), order.end(),
                   [](const AskedShape* a, const AskedShape* b) { return a->count > b->count; });
  std::vector<std::pair<model::GpuRequest, const Profile*>> out;
  for (const AskedShape* a : order) {
    if (out.size() == n) break;
    // Pods without GPUs never reach the extender (kube-scheduler's IsInterested): nobody asks.
    if (a->req.kind == model::RequestKind::kNone) continue;
    if (const Profile* p = select_profile(loaded, a->pod, nullptr)) out.emplace_back(a->req, p);
  }
  return out;
}

VerdictCache* Scheduler::score_cache(const LoadedPolicy& loaded) const {
  const bool current = loaded.cache_mix_version.load() == mix_version_.load();
  return options_.use_cache && current ? &loaded.cache : nullptr;
}

std::unique_lock<std::shared_mutex> Scheduler::lock_for_write() const {
  writers_waiting_.fetch_add(1);
  std::unique_lock lock(mu_);
  writers_waiting_.fetch_sub(1);
  return lock;
}

bool Scheduler::warm(const LoadedPolicy& loaded, const std::function<bool()>& stop) const {
  if (!options_.use_cache) return true;
  std::vector<std::pair<model::GpuRequest, const Profile*>> shapes;
  std::vector<std::string> names;
  std::uint64_t version = 0;
  {
    std::shared_lock lock(mu_);
    version = mix_version_.load();
    if (score_cache(loaded) == nullptr) return false;  // a policy behind the mix
    shapes = most_asked(loaded, options_.warm_shapes);
    if (shapes.empty()) return true;
    for (const model::Node* n : cluster_.nodes()) names.push_back(n->name);
  }
  for (const auto& [req, profile] : shapes) {
    if (uses_draw(*profile)) continue;  // nothing to keep: the random draw is the pod's
    for (std::size_t begin = 0; begin < names.size(); begin += kWarmChunk) {
      if (stop()) return false;
      // glibc's rwlock lets readers in while a writer waits: step aside, or a reserve or a mix
      // change would wait out the whole pass instead of one chunk.
      while (writers_waiting_.load() > 0) std::this_thread::yield();
      std::shared_lock lock(mu_);
      if (mix_version_.load() != version) return false;
      const std::size_t size = std::min(kWarmChunk, names.size() - begin);
      warm_nodes(cluster_, req, *profile, std::span(names).subspan(begin, size), loaded.cache,
                 options_.check_host);
    }
  }
  return true;
}

void Scheduler::forget(const std::string& pod_uid) {
  // The UID stays in seen_order_ until it reaches the front (erasing it there is a scan of up to
  // kMaxSeenPods entries per deleted pod); the bound counts it until then.
  auto lock = lock_for_write();
  seen_.erase(pod_uid);
  const bool was_holder = drain_.reservation() && drain_.reservation()->pod_uid == pod_uid;
  if (drain_.erase(pod_uid) && was_holder) pick_drain();  // a deleted pod waits no more
}

void Scheduler::mix_changed() {
  fragments_.remix();  // follow_changes keeps it over exactly the model's nodes
  summary_.refresh_fragments(fragments_);
  const std::uint64_t version = ++mix_version_;
  auto loaded = policy();
  loaded->cache.clear_scores();  // fit verdicts do not depend on the mix
  loaded->cache_mix_version = version;
}

namespace {

// Every input node (each once) unresolvable for one reason: the pod is over its quota.
FilterResult refuse_all(const std::vector<std::string>& nodes, std::string why) {
  FilterResult r;
  r.reasons.push_back({std::move(why), "over_quota", true});
  std::unordered_set<std::string> seen;
  for (const std::string& n : nodes) {
    if (seen.insert(n).second) r.rejected.push_back({n, 0});
  }
  return r;
}

}  // namespace

FilterResult Scheduler::filter(const LoadedPolicy& loaded, const model::PodInfo& pod,
                               const model::GpuRequest& req,
                               const std::vector<std::string>& nodes) const {
  std::shared_lock lock(mu_);
  VerdictCache* cache = options_.use_cache ? &loaded.cache : nullptr;
  return filter_locked(loaded.policy.quotas, pod, req, nodes, cache);
}

FilterResult Scheduler::filter_locked(const std::vector<Quota>& quotas, const model::PodInfo& pod,
                                      const model::GpuRequest& req,
                                      const std::vector<std::string>& nodes, VerdictCache* cache,
                                      std::vector<const model::Node*>* passed_nodes) const {
  if (!quotas.empty()) {
    std::string why = over_quota(quotas, quota_view(), pod.ns, quota_demand(req));
    if (!why.empty()) return refuse_all(nodes, std::move(why));
  }
  std::vector<const model::Node*> resolved;
  FilterResult r = placement::filter(cluster_, req, nodes, cache, options_.check_host, &resolved);
  if (!quotas.empty()) apply_model_quotas(quotas, pod, req, &r, &resolved);
  drain_.withhold(pod, &r, &resolved);
  if (passed_nodes != nullptr) *passed_nodes = std::move(resolved);
  return r;
}

void Scheduler::apply_model_quotas(const std::vector<Quota>& quotas, const model::PodInfo& pod,
                                   const model::GpuRequest& req, FilterResult* r,
                                   std::vector<const model::Node*>* passed_nodes) const {
  const auto over = models_over_quota(quotas, quota_view(), pod.ns, quota_demand(req));
  if (over.empty()) return;  // the common case: no per-model work per node
  std::vector<std::string> passed;
  std::vector<const model::Node*> kept_nodes;
  for (std::size_t i = 0; i < r->passed.size(); ++i) {
    std::string& name = r->passed[i];
    // The node fails when every model it could serve the pod with is over its limit; a node
    // with several models may pass, and reserve then checks the GPUs actually picked.
    const std::string* why = nullptr;
    bool some_model_ok = false;
    const model::Node* node = (*passed_nodes)[i];
    static const std::vector<model::Gpu> kNoGpus;
    for (const model::Gpu& g : node != nullptr ? node->gpus : kNoGpus) {
      if (!can_serve(g, req)) continue;
      auto it = over.find(model::model_key(g.model));
      if (it == over.end()) {
        some_model_ok = true;
        break;
      }
      if (why == nullptr) why = &it->second;
    }
    if (some_model_ok || why == nullptr) {
      passed.push_back(std::move(name));
      kept_nodes.push_back(node);
      continue;
    }
    auto it = std::find_if(r->reasons.begin(), r->reasons.end(),
                           [&](const FilterResult::Reason& x) { return x.text == *why; });
    if (it == r->reasons.end())
      it = r->reasons.insert(r->reasons.end(), {*why, "over_quota", true});
    r->rejected.push_back({std::move(name), static_cast<std::size_t>(it - r->reasons.begin())});
  }
  r->passed = std::move(passed);
  *passed_nodes = std::move(kept_nodes);
}

FilterResult Scheduler::filter(const LoadedPolicy& loaded, const model::PodInfo& pod,
                               const model::GpuRequest& req, const Profile& profile,
                               const std::vector<std::string>& nodes, std::uint64_t draw) const {
  const auto keep = static_cast<std::size_t>(std::max(profile.keep_best, 0));
  if (keep == 0) return filter(loaded, pod, req, nodes);
  // One read lock for filter and the scores narrowing needs: the nodes that passed still fit
  // when scored, so scoring neither looks their names up again nor re-checks the fit.
  std::shared_lock lock(mu_);
  std::vector<const model::Node*> passed_nodes;
  FilterResult r = filter_locked(loaded.policy.quotas, pod, req, nodes,
                                 options_.use_cache ? &loaded.cache : nullptr, &passed_nodes);
  if (r.passed.size() <= keep) return r;
  narrow(r, keep, score_locked(loaded, req, profile, passed_nodes, draw));
  return r;
}

std::vector<double> Scheduler::score_locked(const LoadedPolicy& loaded,
                                            const model::GpuRequest& req, const Profile& profile,
                                            const std::vector<const model::Node*>& nodes,
                                            std::uint64_t draw) const {
  VerdictCache* cache = score_cache(loaded);
  if (!uses_draw(profile)) {
    return score_passed_nodes(nodes, req, profile, cluster_.slot_count(), cache);
  }
  Profile drawn = profile;  // rare (the random baseline): a copy carries this pod's draw
  drawn.context.draw = draw;
  return score_passed_nodes(nodes, req, drawn, cluster_.slot_count(), nullptr);
}

std::vector<double> Scheduler::score(const LoadedPolicy& loaded, const model::GpuRequest& req,
                                     const Profile& profile, const std::vector<std::string>& nodes,
                                     std::uint64_t draw) const {
  std::shared_lock lock(mu_);
  return score_named_locked(loaded, req, profile, nodes, draw);
}

std::vector<double> Scheduler::score(const LoadedPolicy& loaded, const model::PodInfo& pod,
                                     const model::GpuRequest& req, const Profile& profile,
                                     const std::vector<std::string>& nodes,
                                     std::uint64_t draw) const {
  std::shared_lock lock(mu_);  // one lock: the scores and the withheld node of the same model
  std::vector<double> raw = score_named_locked(loaded, req, profile, nodes, draw);
  drain_.withhold(pod, nodes, &raw);
  return raw;
}

std::vector<double> Scheduler::score_named_locked(const LoadedPolicy& loaded,
                                                  const model::GpuRequest& req,
                                                  const Profile& profile,
                                                  const std::vector<std::string>& nodes,
                                                  std::uint64_t draw) const {
  VerdictCache* cache = score_cache(loaded);
  if (!uses_draw(profile)) {
    return score_nodes(cluster_, req, profile, nodes, cache, options_.check_host);
  }
  Profile drawn = profile;  // rare (the random baseline): a copy carries this pod's draw
  drawn.context.draw = draw;
  return score_nodes(cluster_, req, drawn, nodes, nullptr, options_.check_host);
}

std::vector<int> Scheduler::normalize(const std::vector<std::string>& nodes,
                                      const std::vector<double>& raw) {
  std::vector<std::uint64_t> rank;
  rank.reserve(nodes.size());
  for (const std::string& n : nodes) rank.push_back(tie_break_rank(n));
  return normalize_scores(raw, rank);
}

Result<model::Allocation> Scheduler::reserve(const model::PodInfo& pod,
                                             const model::GpuRequest& req, const Profile& profile,
                                             const std::string& node) {
  return reserve(pod, req, profile, node, {});
}

Result<model::Allocation> Scheduler::reserve(const model::PodInfo& pod,
                                             const model::GpuRequest& req, const Profile& profile,
                                             const std::string& node,
                                             const std::vector<model::Allocation>& held) {
  auto lock = lock_for_write();
  model::GpuRequest fit = req;
  if (!options_.check_host) fit.host = {};
  // The quotas in force now (filter may have run under an older policy), against usage that
  // includes every reservation made since that filter. Checked before other replicas' claims
  // are borrowed into the model, so a refusal returns with the model untouched.
  const auto current = policy();
  const std::vector<Quota>& quotas = current->policy.quotas;
  if (!quotas.empty()) {
    if (std::string why = steer_from_models_over_quota(quotas, pod, node, &fit); !why.empty()) {
      return Error{why};
    }
  }
  // Counted only while this choice is made, under the same lock: nobody sees them.
  std::vector<std::string> borrowed;
  for (const model::Allocation& a : held) {
    if (a.pod_uid == pod.uid || cluster_.allocation(a.pod_uid) != nullptr) continue;
    if (cluster_.restore(a)) borrowed.push_back(a.pod_uid);
  }
  if (!borrowed.empty()) follow_changes();  // strategies read the node's cached measures
  auto placed = place(cluster_, fit, profile, pod, node);
  for (const std::string& uid : borrowed) cluster_.release(uid);
  if (!borrowed.empty()) follow_changes();
  if (!placed) return placed;
  if (!quotas.empty()) {
    std::string why =
        over_quota(quotas, quota_view(), pod.ns, quota_usage(cluster_.find_node(node), *placed));
    if (!why.empty()) return Error{why};
  }
  placed->host = req.host;
  if (Status s = cluster_.commit(*placed); !s) return Error{s.error()};
  follow_changes();
  return placed;
}

std::string Scheduler::steer_from_models_over_quota(const std::vector<Quota>& quotas,
                                                    const model::PodInfo& pod,
                                                    const std::string& node_name,
                                                    model::GpuRequest* fit) const {
  const auto over = models_over_quota(quotas, quota_view(), pod.ns, quota_demand(*fit));
  const model::Node* node = cluster_.find_node(node_name);
  if (over.empty() || node == nullptr) return "";
  std::vector<std::string> allowed;
  const std::string* why = nullptr;
  for (const model::Gpu& g : node->gpus) {
    if (!can_serve(g, *fit)) continue;
    if (auto it = over.find(model::model_key(g.model)); it != over.end()) {
      if (why == nullptr) why = &it->second;
    } else if (std::find(allowed.begin(), allowed.end(), g.model) == allowed.end()) {
      allowed.push_back(g.model);
    }
  }
  if (why == nullptr) return "";  // no GPU of a model over its limit could be picked
  if (allowed.empty()) return *why;
  fit->models = std::move(allowed);
  return "";
}

bool Scheduler::unreserve(const model::Allocation& reserved) {
  auto lock = lock_for_write();
  const model::Allocation* held = cluster_.allocation(reserved.pod_uid);
  if (held == nullptr || !(*held == reserved)) return false;
  cluster_.release(reserved.pod_uid);
  follow_changes();
  return true;
}

bool Scheduler::release(const std::string& pod_uid) {
  auto lock = lock_for_write();
  const bool released = cluster_.release(pod_uid);
  follow_changes();
  return released;
}

std::vector<std::optional<VictimChoice>> Scheduler::select_victims(
    const model::PodInfo& pod, const model::GpuRequest& req, const std::vector<VictimQuery>& nodes,
    const std::vector<DisruptionBudget>& budgets) const {
  model::GpuRequest fit = req;
  if (!options_.check_host) fit.host = {};
  std::shared_lock lock(mu_);
  // One pass over the allocations for all the asked nodes (a preempt call names up to 100).
  std::unordered_map<std::string, std::vector<const model::Allocation*>> on_node;
  for (const VictimQuery& q : nodes) on_node.try_emplace(q.node);
  for (const model::Allocation* a : cluster_.allocations()) {
    if (auto it = on_node.find(a->node); it != on_node.end()) it->second.push_back(a);
  }
  std::vector<std::optional<VictimChoice>> out;
  out.reserve(nodes.size());
  for (const VictimQuery& q : nodes) {
    const model::Node* node = cluster_.find_node(q.node);
    out.push_back(node == nullptr ? std::nullopt
                                  : placement::select_victims(*node, on_node[q.node], fit,
                                                              pod.priority, q.proposed, budgets));
  }
  return out;
}

namespace {

// Filter's verdict per node name.
std::unordered_map<std::string, const FilterResult::Rejection*> rejections(const FilterResult& r) {
  std::unordered_map<std::string, const FilterResult::Rejection*> out;
  for (const FilterResult::Rejection& x : r.rejected) out.emplace(x.node, &x);
  return out;
}

}  // namespace

std::vector<NodeExplanation> Scheduler::explain(const model::PodInfo& pod,
                                                const model::GpuRequest& req,
                                                const Profile& profile,
                                                const std::vector<std::string>& nodes,
                                                std::uint64_t draw) const {
  Profile drawn = profile;  // the draw the random strategy reads, as score() gives it
  drawn.context.draw = draw;
  model::GpuRequest fit = req;
  if (!options_.check_host) fit.host = {};
  const auto loaded = policy();
  std::shared_lock lock(mu_);
  // No caches: an explanation must neither read stale entries nor leave any behind.
  FilterResult filtered = filter_locked(loaded->policy.quotas, pod, req, nodes, nullptr);
  std::vector<double> raw = score_nodes(cluster_, req, drawn, nodes, nullptr, options_.check_host);
  // Narrowed as filter(profile) narrows; prioritize then sees the kept nodes only.
  const auto keep = static_cast<std::size_t>(std::max(profile.keep_best, 0));
  if (keep != 0 && filtered.passed.size() > keep) {
    std::unordered_map<std::string, double> by_name;
    for (std::size_t i = 0; i < nodes.size(); ++i) by_name.emplace(nodes[i], raw[i]);
    std::vector<double> passed_raw;
    for (const std::string& n : filtered.passed) passed_raw.push_back(by_name.at(n));
    narrow(filtered, keep, passed_raw);
    const std::unordered_set<std::string> kept(filtered.passed.begin(), filtered.passed.end());
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      if (kept.count(nodes[i]) == 0) raw[i] = -1;
    }
  }
  const std::vector<int> normalized = normalize(nodes, raw);
  const auto rejected = rejections(filtered);
  std::unordered_set<std::string> done;
  std::vector<NodeExplanation> out;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    if (!done.insert(nodes[i]).second) continue;
    NodeExplanation& e = out.emplace_back();
    e.node = nodes[i];
    if (auto it = rejected.find(nodes[i]); it != rejected.end()) {
      const FilterResult::Reason& why = filtered.reasons[it->second->reason];
      e.verdict = why.unresolvable ? NodeExplanation::Verdict::kUnresolvable
                                   : NodeExplanation::Verdict::kFailed;
      e.reason = why.text;
      e.reason_label = std::string(why.label);
      continue;
    }
    const model::Node* node = cluster_.find_node(nodes[i]);
    if (node == nullptr) continue;  // a pod without GPUs passes unknown nodes: nothing to score
    e.score = explain_fitting_node(*node, req, drawn);
    e.normalized = normalized[i];
    auto placed = place(cluster_, fit, drawn, pod, nodes[i]);
    if (placed) {
      e.placement = std::move(*placed);
    } else {
      e.placement_error = placed.error();
    }
  }
  return out;
}

void Scheduler::mutate(const std::function<void(model::Cluster&)>& f) {
  auto lock = lock_for_write();
  f(cluster_);
  follow_changes();
}

void Scheduler::read(const std::function<void(const model::Cluster&)>& f) const {
  std::shared_lock lock(mu_);
  f(cluster_);
}

void Scheduler::follow_changes() {
  model::Cluster::Changes changes = cluster_.take_changes();
  for (const model::Node* gone : changes.removed) {
    fragments_.erase(gone);
    summary_.erase(gone);
  }
  std::vector<const model::Node*> touched;
  for (const std::string& name : changes.touched) {
    const model::Node* n = cluster_.find_node(name);
    if (n == nullptr) continue;
    fragments_.refresh_node(*n);
    summary_.refresh_node(*n, fragments_);
    touched.push_back(n);
  }
  for (const std::string& uid : changes.allocations) quota_usage_.refresh(cluster_, uid);
  follow_waiting(changes, touched);
}

void Scheduler::follow_waiting(const model::Cluster::Changes& changes,
                               const std::vector<const model::Node*>& touched) {
  if (drain_.empty()) return;
  // A pod that gained an allocation no longer waits.
  bool started = false;
  for (const std::string& uid : changes.allocations) {
    if (cluster_.allocation(uid) != nullptr) started = drain_.erase(uid) || started;
  }
  // After a departure the closest host may be another one: the target is chosen again, among
  // the changed nodes when only they moved.
  if (started || !changes.removed.empty() || !drain_.pick_among(touched, options_.check_host)) {
    pick_drain();
  }
}

bool Scheduler::wait(const model::PodInfo& pod, const model::GpuRequest& req,
                     const Profile& profile, double now_s, WaitSource source) {
  // Most failed filters are of pods too small to reserve: those take no lock.
  if (pod.uid.empty() || profile.drain_min_gpus <= 0 || req.kind != model::RequestKind::kWhole ||
      req.whole < profile.drain_min_gpus) {
    return false;
  }
  const auto loaded = policy();
  auto lock = lock_for_write();
  if (cluster_.allocation(pod.uid) != nullptr) return false;
  if (drain_.contains(pod.uid)) return refresh_wait(pod, req, profile, now_s, source);
  // A pod its quota refuses waits for the quota, not for a node: it must not hold one.
  const std::vector<Quota>& quotas = loaded->policy.quotas;
  if (!quotas.empty() && !over_quota(quotas, quota_view(), pod.ns, quota_demand(req)).empty()) {
    return false;
  }
  // A pod no node could take even empty waits for nothing a drain can give.
  if (pick_drain_target(cluster_.nodes(), req, options_.check_host) == nullptr) return false;
  return refresh_wait(pod, req, profile, now_s, source);
}

bool Scheduler::refresh_wait(const model::PodInfo& pod, const model::GpuRequest& req,
                             const Profile& profile, double now_s, WaitSource source) {
  const DrainQueue::Waited w =
      drain_.wait(pod, req, profile.drain_min_gpus, now_s, source == WaitSource::kUnschedulable);
  // A newly confirmed pod may be older than the holder.
  if (w == DrainQueue::Waited::kConfirmed) pick_drain();
  return w != DrainQueue::Waited::kNo;
}

bool Scheduler::stop_waiting(const std::string& pod_uid) {
  auto lock = lock_for_write();
  const bool was_holder = drain_.reservation() && drain_.reservation()->pod_uid == pod_uid;
  if (!drain_.erase(pod_uid)) return false;
  if (was_holder) pick_drain();
  return true;
}

std::size_t Scheduler::expire_waiting(double cutoff_s) {
  {
    std::shared_lock lock(mu_);
    if (!drain_.any_before(cutoff_s)) return 0;
  }
  auto lock = lock_for_write();
  const std::size_t gone = drain_.expire(cutoff_s);
  if (gone > 0) pick_drain();
  return gone;
}

void Scheduler::pick_drain() {
  if (drain_.empty()) {
    drain_.pick({}, options_.check_host);
    return;
  }
  drain_.pick(cluster_.nodes(), options_.check_host);
}

std::optional<DrainReservation> Scheduler::drain() const {
  std::shared_lock lock(mu_);
  return drain_.reservation();
}

std::size_t Scheduler::waiting() const {
  std::shared_lock lock(mu_);
  return drain_.size();
}

WorkloadMix Scheduler::mix() const {
  std::shared_lock lock(mu_);
  return *mix_;
}

std::vector<QuotaRow> Scheduler::quota_rows() const {
  const auto loaded = policy();
  std::shared_lock lock(mu_);
  return placement::quota_rows(loaded->policy.quotas, quota_view());
}

QuotaView Scheduler::quota_view() const {
  const ClusterSummary& total = summary_.total();
  // Every GPU, whatever its health: a percentage quota is of the cluster's size.
  const auto gpus = static_cast<std::int64_t>(total.gpus_healthy + total.gpus_unhealthy);
  return QuotaView{quota_usage_, gpus, &namespaces_};
}

void Scheduler::set_namespaces(NamespaceLabels all) {
  auto lock = lock_for_write();
  namespaces_ = std::move(all);
}

void Scheduler::set_namespace(const std::string& ns, model::Labels labels) {
  auto lock = lock_for_write();
  namespaces_[ns] = std::move(labels);
}

void Scheduler::erase_namespace(const std::string& ns) {
  auto lock = lock_for_write();
  namespaces_.erase(ns);
}

ClusterSummary Scheduler::summary() const {
  std::shared_lock lock(mu_);
  return summary_.total();
}

std::size_t Scheduler::observed() const {
  std::shared_lock lock(mu_);
  return learner_.observed();
}

}  // namespace gapless::placement
