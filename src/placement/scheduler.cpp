#include "gapless/placement/scheduler.h"

#include <unordered_map>

#include "gapless/placement/fit.h"

namespace gapless::placement {
namespace {

// Pods counted by UID before the oldest is forgotten (pods filtered and never bound stay in the
// table otherwise; real pods are forgotten when they are deleted).
constexpr std::size_t kMaxSeenPods = 200000;

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
  std::unique_lock lock(mu_);
  if (!seen_.insert(pod.uid).second) return false;
  seen_order_.push_back(pod.uid);
  if (seen_order_.size() > kMaxSeenPods) {
    seen_.erase(seen_order_.front());
    seen_order_.pop_front();
  }
  if (options_.fixed_mix == nullptr && learner_.observe(shape_of(req, /*with_memory=*/true))) {
    mix_changed();
  }
  return true;
}

void Scheduler::forget(const std::string& pod_uid) {
  // The UID stays in seen_order_ until it reaches the front (erasing it there is a scan of up to
  // kMaxSeenPods entries per deleted pod); the bound counts it until then.
  std::unique_lock lock(mu_);
  seen_.erase(pod_uid);
}

void Scheduler::mix_changed() {
  fragments_.rebuild(cluster_.nodes());
  summary_.rebuild(cluster_.nodes(), fragments_);
  const std::uint64_t version = ++mix_version_;
  auto loaded = policy();
  loaded->cache.clear();
  loaded->cache_mix_version = version;
}

FilterResult Scheduler::filter(const LoadedPolicy& loaded, const model::GpuRequest& req,
                               const std::vector<std::string>& nodes) const {
  std::shared_lock lock(mu_);
  VerdictCache* cache = options_.use_cache ? &loaded.cache : nullptr;
  return placement::filter(cluster_, req, nodes, cache, options_.check_host);
}

std::vector<double> Scheduler::score(const LoadedPolicy& loaded, const model::GpuRequest& req,
                                     const Profile& profile, const std::vector<std::string>& nodes,
                                     std::uint64_t draw) const {
  std::shared_lock lock(mu_);
  VerdictCache* cache = options_.use_cache && loaded.cache_mix_version.load() == mix_version_.load()
                            ? &loaded.cache
                            : nullptr;
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
  std::unique_lock lock(mu_);
  // Counted only while this choice is made, under the same lock: nobody sees them.
  std::vector<std::string> borrowed;
  for (const model::Allocation& a : held) {
    if (a.pod_uid == pod.uid || cluster_.allocation(a.pod_uid) != nullptr) continue;
    if (cluster_.restore(a)) borrowed.push_back(a.pod_uid);
  }
  if (!borrowed.empty()) follow_changes();  // strategies read the node's cached measures
  model::GpuRequest fit = req;
  if (!options_.check_host) fit.host = {};
  auto placed = place(cluster_, fit, profile, pod, node);
  for (const std::string& uid : borrowed) cluster_.release(uid);
  if (!borrowed.empty()) follow_changes();
  if (!placed) return placed;
  placed->host = req.host;
  if (Status s = cluster_.commit(*placed); !s) return Error{s.error()};
  follow_changes();
  return placed;
}

bool Scheduler::unreserve(const model::Allocation& reserved) {
  std::unique_lock lock(mu_);
  const model::Allocation* held = cluster_.allocation(reserved.pod_uid);
  if (held == nullptr || !(*held == reserved)) return false;
  cluster_.release(reserved.pod_uid);
  follow_changes();
  return true;
}

bool Scheduler::release(const std::string& pod_uid) {
  std::unique_lock lock(mu_);
  const bool released = cluster_.release(pod_uid);
  follow_changes();
  return released;
}

bool Scheduler::frees_room(const model::GpuRequest& req, const std::string& node_name,
                           const std::vector<std::string>& victims) const {
  std::shared_lock lock(mu_);
  const model::Node* node = cluster_.find_node(node_name);
  // A fenced node takes no GPU pods, evictions or not. Its allocations may also be stranded
  // (kept but not applied, after its inventory changed): unapplying one would index GPUs the
  // node no longer has, so never try.
  if (node == nullptr || node->fenced()) return false;
  model::Node after = *node;
  for (const std::string& uid : victims) {
    const model::Allocation* a = cluster_.allocation(uid);
    if (a != nullptr && a->node == node->name) model::unapply_allocation(after, *a);
  }
  model::GpuRequest fit = req;
  if (!options_.check_host) fit.host = {};
  return check_fit(after, fit).fits();
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
  std::shared_lock lock(mu_);
  // No caches: an explanation must neither read stale entries nor leave any behind.
  const FilterResult filtered =
      placement::filter(cluster_, req, nodes, nullptr, options_.check_host);
  const std::vector<int> normalized =
      normalize(nodes, score_nodes(cluster_, req, drawn, nodes, nullptr, options_.check_host));
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
  std::unique_lock lock(mu_);
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
  for (const std::string& name : changes.touched) {
    if (const model::Node* n = cluster_.find_node(name)) {
      fragments_.refresh_node(*n);
      summary_.refresh_node(*n, fragments_);
    }
  }
}

WorkloadMix Scheduler::mix() const {
  std::shared_lock lock(mu_);
  return *mix_;
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
